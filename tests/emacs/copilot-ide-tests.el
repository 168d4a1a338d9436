;;; copilot-ide-tests.el --- ERT tests of copilot-ide.el -*- lexical-binding: t; -*-

;;; Commentary:

;; Run in batch (tests/emacs/test_emacs_package.py does):
;;   emacs -Q --batch -L editors/emacs -l tests/emacs/copilot-ide-tests.el \
;;         -f ert-run-tests-batch-and-exit
;; The end-to-end tests run the real bridge (python3 -m ide_protocol bridge)
;; and, as the CLI, tests/emacs/fake_cli.py: the library's own client over
;; the bridge's socket.  COPILOT_HOME is a temporary folder per test.

;;; Code:

(require 'ert)
(require 'json)
(require 'cl-lib)
(require 'flymake)
(require 'copilot-ide)

(defconst copilot-ide-tests--dir
  (file-name-directory (or load-file-name buffer-file-name)))

(defconst copilot-ide-tests--sample "first\naé€😀b😀c\nthird\n"
  "Line 1 holds characters of 1, 2, 3 and 4 UTF-8 bytes; 😀 is 2 UTF-16 units.")

(defvar copilot-ide-tests--home nil "This test's COPILOT_HOME.")

(defun copilot-ide-tests--wait (predicate what &optional timeout)
  "Wait until PREDICATE returns non-nil (returned); fail naming WHAT after TIMEOUT s."
  (let ((deadline (+ (float-time) (or timeout 30)))
        value)
    (while (not (setq value (funcall predicate)))
      (when (> (float-time) deadline)
        (error "Timed out waiting for %s" what))
      (accept-process-output nil 0.02))
    value))

(defun copilot-ide-tests--locks ()
  "The lock files in this test's COPILOT_HOME."
  (let ((dir (expand-file-name "ide" copilot-ide-tests--home)))
    (and (file-directory-p dir) (directory-files dir nil "\\.lock\\'"))))

(defmacro copilot-ide-tests--with-bridge (&rest body)
  "Run BODY visiting a.txt of a new workspace, with `copilot-ide-mode' on.
Binds `workspace' and `file'.  After BODY: the mode off, the bridge
gone, no lock left."
  (declare (indent 0) (debug t))
  `(let* ((root (file-truename (make-temp-file "copilot-ide-ws" t)))
          (copilot-ide-tests--home (file-truename (make-temp-file "copilot-ide-home" t)))
          (process-environment (cons (concat "COPILOT_HOME=" copilot-ide-tests--home)
                                     process-environment))
          (workspace root)
          (file (expand-file-name "a.txt" root))
          (coding-system-for-write 'utf-8-unix))
     (ignore workspace)
     (write-region copilot-ide-tests--sample nil file nil 'silent)
     (let ((buffer (find-file-noselect file)))
       (unwind-protect
           (progn
             (switch-to-buffer buffer)
             (delete-other-windows)
             (copilot-ide-mode 1)
             (copilot-ide-tests--wait #'copilot-ide--live-p "the bridge's ready message")
             ,@body)
         (let ((process copilot-ide--process))
           (copilot-ide-mode -1)
           (when process
             (copilot-ide-tests--wait (lambda () (not (process-live-p process))) "the bridge's exit")))
         (should-not (copilot-ide-tests--locks))
         (dolist (p (process-list))
           (when (string-prefix-p "fake-cli" (process-name p))
             (delete-process p)))
         (dolist (b (buffer-list))
           (when (string-prefix-p "*copilot-ide diff" (buffer-name b))
             (kill-buffer b)))
         (with-current-buffer buffer (set-buffer-modified-p nil))
         (kill-buffer buffer)
         (delete-directory root t)
         (delete-directory copilot-ide-tests--home t)))))

;;; A CLI-like client (tests/emacs/fake_cli.py)

(defun copilot-ide-tests--cli ()
  "Start the fake CLI on the bridge's lock; return it once connected."
  (let* ((default-directory copilot-ide-tests--dir)
         (process (make-process
                   :name "fake-cli" :connection-type 'pipe :coding 'utf-8-unix :noquery t
                   :command (list copilot-ide-python (expand-file-name "fake_cli.py" copilot-ide-tests--dir)
                                  (alist-get 'lock copilot-ide--ready))
                   :stderr (get-buffer-create " *fake-cli stderr*")
                   :filter (lambda (proc chunk)
                             (let ((text (concat (process-get proc 'partial) chunk)) newline)
                               (while (setq newline (string-match-p "\n" text))
                                 (process-put proc 'messages
                                              (append (process-get proc 'messages)
                                                      (list (json-parse-string
                                                             (substring text 0 newline)
                                                             :object-type 'alist :array-type 'list
                                                             :null-object nil :false-object :false))))
                                 (setq text (substring text (1+ newline))))
                               (process-put proc 'partial text))))))
    (set-process-query-on-exit-flag (get-buffer-process " *fake-cli stderr*") nil)
    (copilot-ide-tests--cli-wait process (lambda (m) (assq 'connected m)) "the fake CLI's connection")
    (copilot-ide-tests--wait (lambda () (> copilot-ide--sessions 0)) "the connected message")
    process))

(defun copilot-ide-tests--cli-send (cli command)
  "Send COMMAND (an alist) to the fake CLI."
  (process-send-string cli (concat (json-serialize command) "\n")))

(defun copilot-ide-tests--cli-wait (cli predicate what)
  "The first message of CLI satisfying PREDICATE (removed from its list); WHAT for errors."
  (copilot-ide-tests--wait
   (lambda ()
     (let ((found (cl-find-if predicate (process-get cli 'messages))))
       (when found
         (process-put cli 'messages (delq found (process-get cli 'messages))))
       found))
   what))

(defun copilot-ide-tests--tool (cli name &optional args)
  "Call tool NAME with ARGS as the fake CLI; return its decoded result."
  (copilot-ide-tests--cli-send cli `((tool . ,name) (args . ,(or args (make-hash-table)))))
  (let ((reply (copilot-ide-tests--cli-wait cli (lambda (m) (equal (alist-get 'tool m) name))
                                            (format "the %s result" name))))
    (should-not (alist-get 'error reply))
    (alist-get 'result reply)))

(defun copilot-ide-tests--push (cli method)
  "The next push of METHOD the fake CLI got."
  (alist-get 'params (copilot-ide-tests--cli-wait cli (lambda (m) (equal (alist-get 'push m) method))
                                                  (format "a %s push" method))))

(defun copilot-ide-tests--cli-quit (cli)
  "End the fake CLI's session and wait for its exit."
  (copilot-ide-tests--cli-send cli '((quit . t)))
  (copilot-ide-tests--wait (lambda () (not (process-live-p cli))) "the fake CLI's exit"))

(defun copilot-ide-tests--open-diff (cli new tab)
  "Have the fake CLI propose NEW as a.txt's text in tab TAB; return the diff buffer.
Returned once shown: a timer shows it after the bridge's message made it,
and a wait can end between the two."
  (copilot-ide-tests--cli-send cli `((tool . "open_diff")
                                     (args . ((original_file_path . ,(buffer-file-name))
                                              (new_file_contents . ,new) (tab_name . ,tab)))))
  (copilot-ide-tests--wait (lambda () (let ((buffer (get-buffer "*copilot-ide diff: a.txt*")))
                                        (and buffer (get-buffer-window buffer) buffer)))
                           "the diff buffer shown"))

(defun copilot-ide-tests--pos (line character)
  "A wire position."
  `((line . ,line) (character . ,character)))

;;; Pure parts

(ert-deftest copilot-ide-filter-takes-arbitrary-chunks ()
  "Output cut anywhere (inside a line, between lines) gives the same messages."
  (let* ((lines (concat "{\"type\":\"status\",\"sessions\":[],\"id\":\"é😀\"}\n"
                        "{\"type\":\"stopped\",\"reason\":\"a😀b\"}\n"))
         (fake (make-pipe-process :name "copilot-ide-fake" :noquery t))
         (copilot-ide--process fake)
         seen)
    (unwind-protect
        (cl-letf (((symbol-function 'copilot-ide--handle) (lambda (msg) (push msg seen))))
          (dotimes (cut (length lines))
            (dotimes (cut2 (- (length lines) cut))
              (setq seen nil)
              (let ((c2 (+ cut cut2)))
                (copilot-ide--filter fake (substring lines 0 cut))
                (copilot-ide--filter fake (substring lines cut c2))
                (copilot-ide--filter fake (substring lines c2)))
              (should (equal (nreverse seen)
                             '(((type . "status") (sessions) (id . "é😀"))
                               ((type . "stopped") (reason . "a😀b"))))))))
      (delete-process fake))))

(ert-deftest copilot-ide-selection-message-counts-code-points ()
  "The selection message holds code point columns and the text of its lines."
  (with-temp-buffer
    (insert copilot-ide-tests--sample)
    (setq buffer-file-name "/tmp/copilot-ide-test.txt")
    (set-window-buffer (selected-window) (current-buffer))
    (transient-mark-mode 1)
    (goto-char (point-min))
    (forward-line 1)
    (forward-char 3)
    (set-mark (point))
    (forward-char 3)
    (activate-mark)
    (let ((msg (copilot-ide--selection-message)))
      (should (equal (alist-get 'text msg) "😀b😀"))
      (should (equal (alist-get 'start msg) (copilot-ide-tests--pos 1 3)))
      (should (equal (alist-get 'end msg) (copilot-ide-tests--pos 1 6)))
      (should (equal (alist-get 'lines msg) '((\1 . "aé€😀b😀c")))))
    (deactivate-mark)
    (let ((msg (copilot-ide--selection-message)))
      (should (equal (alist-get 'text msg) ""))
      (should (equal (alist-get 'start msg) (alist-get 'end msg))))
    (setq buffer-file-name nil)))

(ert-deftest copilot-ide-line-numbers-follow-moves-and-edits ()
  "Line numbers counted from the last one numbered match `line-number-at-pos'."
  (with-temp-buffer
    (dotimes (i 40) (insert (format "line %d 😀\n" i)))
    (let ((copilot-ide--line-cache nil))
      (dolist (line '(0 5 30 29 2 39 39 17 0 40))
        (goto-char (point-min))
        (forward-line line)
        (should (= (copilot-ide--line-number (line-beginning-position)) line))
        (when (= line 17)                  ; an edit: counted afresh
          (goto-char (point-min))
          (insert "new\nlines\n")
          (goto-char (point-min))
          (forward-line 25)
          (should (= (copilot-ide--line-number (point)) 25)))))))

(ert-deftest copilot-ide-json-el-encodes-and-decodes-as-the-native-parser ()
  "Without libjansson, json.el writes and reads the same messages."
  (let ((msg `((type . "diagnostics") (path . "/tmp/a b\"c.txt") (flag . :false) (none . :null) (yes . t)
               (diagnostics . [((message . "é😀\n\ttab") (start (line . 0) (character . 3)))])
               (lines (\0 . "a😀\u0001b")))))
    (should (equal (copilot-ide--decode (copilot-ide--encode-json-el msg))
                   (copilot-ide--decode (copilot-ide--encode msg))))
    (should (equal (copilot-ide--decode-json-el (copilot-ide--encode msg))
                   (copilot-ide--decode (copilot-ide--encode msg))))
    (should (equal (alist-get 'lines (copilot-ide--decode-json-el (copilot-ide--encode msg)))
                   '((\0 . "a😀\u0001b"))))))

(ert-deftest copilot-ide-a-bridge-that-cannot-start-turns-the-mode-off ()
  "No Python, or no library: the mode goes off again and says why."
  (let ((copilot-ide-python "/nonexistent/python3"))
    (copilot-ide-mode 1)
    (should-not copilot-ide-mode)
    (should-not copilot-ide--process)
    (should-not (memq #'copilot-ide--schedule-selection post-command-hook)))
  ;; The library folder holds an `ide_protocol' package without the bridge: put first
  ;; on `sys.path' by the launcher, it hides any copy installed where Python looks (a
  ;; `pip install .'), so the bridge cannot start in any environment.
  (let* ((copilot-ide-library-path (make-temp-file "copilot-ide-empty" t))
         (default-directory (file-name-as-directory copilot-ide-library-path)) ; not the checkout
         (process-environment (cons "PYTHONPATH=" process-environment))
         (messages nil))
    (make-directory (expand-file-name "ide_protocol" copilot-ide-library-path))
    (with-temp-file (expand-file-name "ide_protocol/__init__.py" copilot-ide-library-path))
    (cl-letf (((symbol-function 'message)
               (lambda (format &rest args) (push (apply #'format-message format args) messages))))
      (copilot-ide-mode 1)
      (should copilot-ide-mode)
      (copilot-ide-tests--wait (lambda () (not copilot-ide-mode)) "the mode off")
      (copilot-ide-tests--wait
       (lambda () (cl-some (lambda (m) (string-match-p "the bridge ended[^z-a]*No module named" m)) messages))
       "the report of the bridge's end"))
    (delete-directory copilot-ide-library-path t)))

(ert-deftest copilot-ide-a-project-s-own-ide-protocol-folder-never-runs ()
  "The bridge imports the library, not an `ide_protocol' folder of the project."
  (let* ((root (file-truename (make-temp-file "copilot-ide-hostile" t)))
         (home (make-temp-file "copilot-ide-home" t))
         (process-environment (cons (concat "COPILOT_HOME=" home) process-environment))
         (marker (expand-file-name "ran" root))
         (default-directory (file-name-as-directory root)))
    (make-directory (expand-file-name "ide_protocol" root))
    (write-region "" nil (expand-file-name "ide_protocol/__init__.py" root) nil 'silent)
    (write-region (format "open(%S, 'w').close()\n" marker) nil
                  (expand-file-name "ide_protocol/__main__.py" root) nil 'silent)
    (unwind-protect
        (progn
          (copilot-ide-mode 1)
          (copilot-ide-tests--wait #'copilot-ide--live-p "the bridge's ready")
          (should (equal (alist-get 'folders copilot-ide--ready) (list root)))
          (should-not (file-exists-p marker)))
      (let ((process copilot-ide--process))
        (copilot-ide-mode -1)
        (when process
          (copilot-ide-tests--wait (lambda () (not (process-live-p process))) "the bridge's exit")))
      (delete-directory root t)
      (delete-directory home t))))

;;; With the real bridge

(ert-deftest copilot-ide-region-reaches-the-cli-in-utf16 ()
  "A region of the selected window reaches the CLI with UTF-16 positions."
  (copilot-ide-tests--with-bridge
    (should (equal (copilot-ide--lighter) " Copilot[-]"))
    (let ((cli (copilot-ide-tests--cli)))
      (should (equal (copilot-ide--lighter) " Copilot[1]"))
      (should (string-match-p "CLI sessions connected: 1" (copilot-ide-status)))
      (transient-mark-mode 1)
      (goto-char (point-min))
      (forward-line 1)
      (forward-char 3)
      (set-mark (point))
      (forward-char 3)
      (activate-mark)
      (copilot-ide--schedule-selection)   ; what post-command-hook does
      (let ((params (copilot-ide-tests--push cli "selection_changed")))
        (should (equal (alist-get 'text params) "😀b😀"))
        (should (equal (alist-get 'filePath params) file))
        (should (equal (alist-get 'selection params)
                       `((start . ,(copilot-ide-tests--pos 1 3)) (end . ,(copilot-ide-tests--pos 1 8))
                         (isEmpty . :false)))))
      (let ((selection (copilot-ide-tests--tool cli "get_selection")))
        (should (equal (alist-get 'text selection) "😀b😀"))
        (should (eq (alist-get 'current selection) t)))
      (copilot-ide-tests--cli-quit cli)
      (copilot-ide-tests--wait (lambda () (= copilot-ide--sessions 0)) "the disconnected message")
      (should (equal (copilot-ide--lighter) " Copilot[-]")))))

(defun copilot-ide-tests--backend (report-fn &rest _)
  "A flymake backend: one warning on the emoji of line 1 (REPORT-FN gets it)."
  (save-excursion
    (goto-char (point-min))
    (forward-line 1)
    (let ((beg (+ (point) 3)))
      (funcall report-fn (list (flymake-make-diagnostic (current-buffer) beg (1+ beg) :warning
                                                        "an emoji"))))))

(ert-deftest copilot-ide-flymake-diagnostics-reach-the-cli ()
  "Flymake's diagnostics (polled: Emacs 28 has no hook) reach get_diagnostics."
  (copilot-ide-tests--with-bridge
    (let ((cli (copilot-ide-tests--cli))
          (copilot-ide-diagnostics-interval 0.1))
      (setq-local flymake-diagnostic-functions (list #'copilot-ide-tests--backend))
      (flymake-mode 1)
      (flymake-start)
      (copilot-ide-tests--wait #'flymake-diagnostics "flymake's diagnostic")
      (copilot-ide--poll-diagnostics)
      (copilot-ide-tests--push cli "diagnostics_changed")
      (let* ((result (copilot-ide-tests--tool cli "get_diagnostics"))
             (diagnostic (car (alist-get 'diagnostics (car result)))))
        (should (equal (alist-get 'filePath (car result)) file))
        (should (equal (alist-get 'message diagnostic) "an emoji"))
        (should (equal (alist-get 'severity diagnostic) "Warning"))
        (should (equal (alist-get 'range diagnostic)
                       `((start . ,(copilot-ide-tests--pos 1 3)) (end . ,(copilot-ide-tests--pos 1 5))))))
      (flymake-mode -1)
      (copilot-ide--poll-diagnostics)      ; flymake off: the file's diagnostics are cleared
      (copilot-ide-tests--push cli "diagnostics_changed")
      (should-not (copilot-ide-tests--tool cli "get_diagnostics"))
      (copilot-ide-tests--cli-quit cli))))

(defun copilot-ide-tests--flycheck ()
  "Non-nil when flycheck can be loaded (Debian's elpa-flycheck, `make emacs-deps')."
  (or (require 'flycheck nil t)
      (progn                            ; -Q skips Debian's start-up, which adds these
        (dolist (dir (file-expand-wildcards "/usr/share/emacs/site-lisp/elpa/*"))
          (add-to-list 'load-path dir t))
        (require 'flycheck nil t))))

(declare-function flycheck-define-generic-checker "ext:flycheck")
(declare-function flycheck-error-new-at "ext:flycheck")
(declare-function flycheck-buffer "ext:flycheck")
(defvar flycheck-checkers)

(ert-deftest copilot-ide-flycheck-errors-reach-the-cli ()
  "Flycheck's errors reach get_diagnostics when its check ends."
  (unless (copilot-ide-tests--flycheck)
    (ert-skip "flycheck is not installed (Debian: elpa-flycheck, installed by make emacs-deps)"))
  (copilot-ide-tests--with-bridge
    (let ((cli (copilot-ide-tests--cli)))
      (flycheck-define-generic-checker 'copilot-ide-test-checker
        "A checker of the test's own: one warning on the emoji of line 2."
        :start (lambda (checker callback)
                 (funcall callback 'finished
                          (list (flycheck-error-new-at 2 4 'warning "flycheck says" :checker checker
                                                       :end-line 2 :end-column 5))))
        :modes (list major-mode))
      (setq-local flycheck-checkers '(copilot-ide-test-checker))
      (flycheck-mode 1)
      (flycheck-buffer)
      (copilot-ide-tests--push cli "diagnostics_changed")
      (let* ((result (copilot-ide-tests--tool cli "get_diagnostics"))
             (diagnostic (car (alist-get 'diagnostics (car result)))))
        (should (equal (alist-get 'message diagnostic) "flycheck says"))
        (should (equal (alist-get 'severity diagnostic) "Warning"))
        (should (equal (alist-get 'source diagnostic) "copilot-ide-test-checker"))
        ;; Columns 4-5 (1-based): the emoji, code points 3-4, UTF-16 3-5.
        (should (equal (alist-get 'range diagnostic)
                       `((start . ,(copilot-ide-tests--pos 1 3)) (end . ,(copilot-ide-tests--pos 1 5))))))
      (flycheck-mode -1)
      (copilot-ide-tests--cli-quit cli))))

(ert-deftest copilot-ide-diff-accepted-shown-without-selecting-then-reverted ()
  "A diff is shown, not selected; C-c C-c accepts; the CLI's write is reverted in."
  (copilot-ide-tests--with-bridge
    (let* ((cli (copilot-ide-tests--cli))
           (window (selected-window))
           (new "first\nsecond 😀\n")
           (diff (copilot-ide-tests--open-diff cli new "[Copilot CLI] - a.txt")))
      (should (eq (selected-window) window))
      (should (eq (window-buffer window) (get-file-buffer file)))
      (should (get-buffer-window diff))
      (with-current-buffer diff
        (should (eq major-mode 'diff-mode))
        (should copilot-ide-diff-mode)
        (should buffer-read-only)
        (should (string-match-p "^\\+second 😀$" (buffer-string)))
        (should (eq (key-binding (kbd "C-c C-c")) #'copilot-ide-accept))
        (should (eq (key-binding (kbd "C-c C-k")) #'copilot-ide-reject))
        (copilot-ide-accept))
      (should-not (buffer-live-p diff))
      (let ((answer (alist-get 'result (copilot-ide-tests--cli-wait
                                        cli (lambda (m) (equal (alist-get 'tool m) "open_diff"))
                                        "the open_diff answer"))))
        (should (equal (alist-get 'result answer) "SAVED"))
        (should (equal (alist-get 'trigger answer) "accepted_via_button")))
      ;; The CLI writes the file itself (PROTOCOL.md §4): the buffer follows.
      (sleep-for 0.05)
      (let ((coding-system-for-write 'utf-8-unix))
        (write-region new nil file nil 'silent))
      (copilot-ide-tests--wait (lambda () (equal (buffer-string) new)) "the buffer reverted")
      (copilot-ide-tests--cli-quit cli))))

(ert-deftest copilot-ide-diff-rejected-by-killing-its-buffer ()
  "Killing a diff buffer rejects the diff; the proposed style shows the new text."
  (copilot-ide-tests--with-bridge
    (let* ((cli (copilot-ide-tests--cli))
           (before (buffer-string))
           (diff (let ((copilot-ide-diff-style 'proposed))
                   (copilot-ide-tests--open-diff cli "proposed text\n" "tab"))))
      (with-current-buffer diff
        (should (equal (buffer-string) "proposed text\n")))
      (kill-buffer diff)
      (let ((answer (alist-get 'result (copilot-ide-tests--cli-wait
                                        cli (lambda (m) (equal (alist-get 'tool m) "open_diff"))
                                        "the open_diff answer"))))
        (should (equal (alist-get 'result answer) "REJECTED"))
        (should (equal (alist-get 'trigger answer) "rejected_via_button")))
      (should (equal (buffer-string) before))
      (should (= (hash-table-count copilot-ide--diffs) 0))
      (copilot-ide-tests--cli-quit cli))))

(ert-deftest copilot-ide-diff-closed-by-the-cli-kills-the-buffer-and-watches-the-file ()
  "A close_diff from the CLI (the user answered in the terminal) kills the buffer;
the file the CLI writes next is reverted in, or asked about when modified."
  (copilot-ide-tests--with-bridge
    (let* ((cli (copilot-ide-tests--cli))
           (diff (copilot-ide-tests--open-diff cli "from the terminal\n" "T1")))
      (copilot-ide-tests--cli-send cli '((tool . "close_diff") (args . ((tab_name . "T1")))))
      (copilot-ide-tests--wait (lambda () (not (buffer-live-p diff))) "the diff buffer killed")
      (sleep-for 0.05)
      (let ((coding-system-for-write 'utf-8-unix))
        (write-region "from the terminal\n" nil file nil 'silent))
      (copilot-ide-tests--wait (lambda () (equal (buffer-string) "from the terminal\n")) "the revert")
      ;; Unsaved changes: the user is asked, and a no keeps them.
      (insert "mine ")
      (let (asked)
        (cl-letf (((symbol-function 'yes-or-no-p) (lambda (&rest _) (setq asked t) nil)))
          (copilot-ide-tests--open-diff cli "second\n" "T2")
          (copilot-ide-tests--cli-send cli '((tool . "close_diff") (args . ((tab_name . "T2")))))
          (copilot-ide-tests--wait (lambda () (not (get-buffer "*copilot-ide diff: a.txt*"))) "closed")
          (sleep-for 0.05)
          (let ((coding-system-for-write 'utf-8-unix))
            (write-region "second\n" nil file nil 'silent))
          (copilot-ide-tests--wait (lambda () asked) "the question"))
        (should (equal (buffer-string) "mine from the terminal\n")))
      (copilot-ide-tests--cli-quit cli))))

;;; The CLI's text is untrusted

(defun copilot-ide-tests--propose (cli path new tab)
  "Have the fake CLI propose NEW as PATH's text in tab TAB (no waiting)."
  (copilot-ide-tests--cli-send cli `((tool . "open_diff")
                                     (args . ((original_file_path . ,path)
                                              (new_file_contents . ,new) (tab_name . ,tab))))))

(defun copilot-ide-tests--open-diff-answer (cli)
  "The result of the fake CLI's open_diff, once answered."
  (alist-get 'result (copilot-ide-tests--cli-wait
                      cli (lambda (m) (equal (alist-get 'tool m) "open_diff")) "the open_diff answer")))

(ert-deftest copilot-ide-remote-paths-never-reach-file-functions ()
  "A TRAMP-like path from the CLI is shown, but never looked up (that would connect)."
  (copilot-ide-tests--with-bridge
    (let* ((cli (copilot-ide-tests--cli))
           (remote "/ssh:evil.invalid:/tmp/x.txt")
           seen
           ;; Recorded and not run: the real ones would open an SSH connection.
           (guard (lambda (orig name &rest args)
                    (if (and (stringp name) (string-match-p "evil\\.invalid" name))
                        (progn (push name seen) nil)
                      (apply orig name args)))))
      (dolist (f '(find-buffer-visiting file-truename abbreviate-file-name get-file-buffer))
        (advice-add f :around guard))
      (unwind-protect
          (let ((copilot-ide-diff-style 'proposed))
            (copilot-ide-tests--propose cli remote "hi\n" "R1")
            (let ((diff (copilot-ide-tests--wait (lambda () (get-buffer "*copilot-ide diff: x.txt*"))
                                                 "the diff buffer")))
              (sleep-for 0.2)           ; the timer that displays it and says so
              (copilot-ide-tests--cli-send cli '((tool . "close_diff") (args . ((tab_name . "R1")))))
              (copilot-ide-tests--wait (lambda () (not (buffer-live-p diff))) "the diff buffer killed"))
            (copilot-ide-tests--open-diff-answer cli)
            (should-not seen)
            (should-not copilot-ide--watched))
        (dolist (f '(find-buffer-visiting file-truename abbreviate-file-name get-file-buffer))
          (advice-remove f guard)))
      (should (copilot-ide--local-path-p file))
      (dolist (path '("/ssh:h:/x" "/tmp/../ssh:h:/x" "/sudo::/etc/passwd" "a.txt" "~/a.txt" nil))
        (should-not (copilot-ide--local-path-p path)))
      (copilot-ide-tests--cli-quit cli))))

(ert-deftest copilot-ide-proposal-runs-only-programming-modes ()
  "An .org proposal is not shown in `org-mode' (it reads the files the text names)."
  (copilot-ide-tests--with-bridge
    (let ((cli (copilot-ide-tests--cli))
          (copilot-ide-diff-style 'proposed)
          read)
      (cl-letf (((symbol-function 'org-mode) (lambda () (setq read t) (error "Ran org-mode"))))
        (copilot-ide-tests--propose cli (expand-file-name "notes.org" workspace)
                                    "#+SETUPFILE: /dev/zero\n* x\n" "O1")
        (let ((diff (copilot-ide-tests--wait (lambda () (get-buffer "*copilot-ide diff: notes.org*"))
                                             "the diff buffer")))
          (sleep-for 0.1)
          (should (buffer-live-p diff))
          (with-current-buffer diff
            (should (eq major-mode 'fundamental-mode))
            (should copilot-ide-diff-mode)
            (copilot-ide-reject))))
      (should-not read)
      (should (equal (alist-get 'result (copilot-ide-tests--open-diff-answer cli)) "REJECTED"))
      ;; A programming mode still colours its text.
      (copilot-ide-tests--propose cli (expand-file-name "b.el" workspace) "(ignore)\n" "E1")
      (with-current-buffer (copilot-ide-tests--wait (lambda () (get-buffer "*copilot-ide diff: b.el*"))
                                                    "the .el diff buffer")
        (should (eq major-mode 'emacs-lisp-mode))
        (copilot-ide-reject))
      (copilot-ide-tests--open-diff-answer cli)
      (copilot-ide-tests--cli-quit cli))))

(define-derived-mode copilot-ide-tests-broken-mode prog-mode "Broken"
  "A programming mode that cannot show its text."
  (error "Buffer format not recognized"))

(ert-deftest copilot-ide-diff-that-cannot-be-shown-is-rejected ()
  "A proposal whose mode fails is rejected at once, and said so: the CLI never waits for ever."
  (copilot-ide-tests--with-bridge
    (let ((cli (copilot-ide-tests--cli))
          (copilot-ide-diff-style 'proposed)
          (auto-mode-alist (cons '("\\.broken\\'" . copilot-ide-tests-broken-mode) auto-mode-alist)))
      (copilot-ide-tests--propose cli (expand-file-name "data.broken" workspace) "x\n" "B1")
      (let ((answer (copilot-ide-tests--open-diff-answer cli)))
        (should (equal (alist-get 'result answer) "REJECTED")))
      (should (= (hash-table-count copilot-ide--diffs) 0))
      (should-not (get-buffer "*copilot-ide diff: data.broken*"))
      (should (string-match-p "cannot show the edit of .*data\\.broken.*rejected"
                              (with-current-buffer "*Messages*" (buffer-string))))
      (copilot-ide-tests--cli-quit cli))))

(ert-deftest copilot-ide-references-reach-the-cli ()
  "`copilot-ide-send-file' and `copilot-ide-send-region' push add_file_reference."
  (copilot-ide-tests--with-bridge
    (let ((cli (copilot-ide-tests--cli)))
      (copilot-ide-send-file)
      (let ((params (copilot-ide-tests--push cli "add_file_reference")))
        (should (equal (alist-get 'filePath params) file))
        (should-not (alist-get 'selection params)))
      (goto-char (point-min))
      (forward-line 1)
      (copilot-ide-send-region (+ (point) 4) (line-end-position))
      (let ((params (copilot-ide-tests--push cli "add_file_reference")))
        (should (equal (alist-get 'selectedText params) "b😀c"))
        (should (equal (alist-get 'selection params)
                       `((start . ,(copilot-ide-tests--pos 1 5)) (end . ,(copilot-ide-tests--pos 1 9))))))
      (copilot-ide-tests--cli-quit cli))))

(ert-deftest copilot-ide-mode-off-and-on-rewrites-the-lock ()
  "Off removes the lock (a pending diff is rejected as client_disconnected); on writes a new one."
  (copilot-ide-tests--with-bridge
    (let* ((cli (copilot-ide-tests--cli))
           (first-lock (alist-get 'lock copilot-ide--ready))
           (process copilot-ide--process)
           (diff (copilot-ide-tests--open-diff cli "pending\n" "P")))
      (should (equal (copilot-ide-tests--locks) (list (file-name-nondirectory first-lock))))
      (copilot-ide-mode -1)
      (should-not (buffer-live-p diff))
      (copilot-ide-tests--wait (lambda () (not (process-live-p process))) "the bridge's exit")
      (should-not (copilot-ide-tests--locks))
      (let ((answer (alist-get 'result (copilot-ide-tests--cli-wait
                                        cli (lambda (m) (equal (alist-get 'tool m) "open_diff"))
                                        "the open_diff answer"))))
        (should (equal (alist-get 'trigger answer) "client_disconnected")))
      (should (equal (copilot-ide--lighter) " Copilot[off]"))
      (copilot-ide-mode 1)
      (copilot-ide-tests--wait #'copilot-ide--live-p "the new bridge's ready")
      (let ((locks (copilot-ide-tests--locks)))
        (should (= (length locks) 1))
        (should-not (equal (car locks) (file-name-nondirectory first-lock))))
      (copilot-ide-tests--cli-quit cli))))

(ert-deftest copilot-ide-trusted-marks-the-lock-trusted ()
  "The lock says isTrusted false by default, true with `copilot-ide-trusted'."
  (copilot-ide-tests--with-bridge
    (let ((lock-of (lambda ()
                     (let ((json-object-type 'alist))
                       (json-read-file (alist-get 'lock copilot-ide--ready))))))
      (should (eq (alist-get 'isTrusted (funcall lock-of)) :json-false))
      (copilot-ide-mode -1)
      (let ((copilot-ide-trusted t))
        (copilot-ide-mode 1)
        (copilot-ide-tests--wait #'copilot-ide--live-p "the trusted bridge's ready")
        (should (eq (alist-get 'isTrusted (funcall lock-of)) t))))))

(ert-deftest copilot-ide-kill-emacs-hook-removes-the-lock ()
  "At exit the bridge is stopped and Emacs waits until its lock is gone."
  (copilot-ide-tests--with-bridge
    (let ((process copilot-ide--process))
      (should (memq #'copilot-ide--kill-emacs kill-emacs-hook))
      (should-not (process-query-on-exit-flag process))
      (should (eq (process-type process) 'real))
      (should-not (process-tty-name process))
      (copilot-ide--kill-emacs)
      (should-not (copilot-ide-tests--locks))
      (copilot-ide-tests--wait (lambda () (not (process-live-p process))) "the bridge's exit"))))

(ert-deftest copilot-ide-lost-messages-are-said ()
  "The bridge says where messages were lost (Emacs did not read): so does Emacs."
  (let ((messages (get-buffer-create "*Messages*")))
    (copilot-ide--handle '((type . "dropped") (messages . 3)))
    (should (string-match-p "copilot-ide: 3 messages from the bridge were lost"
                            (with-current-buffer messages (buffer-string))))))

(ert-deftest copilot-ide-bridge-errors-are-reported-not-raised ()
  "A refused line comes back as an error message; the bridge goes on."
  (copilot-ide-tests--with-bridge
    (let (reply)
      (copilot-ide--send '((type . "diff_answer") (diff . 42) (accept . t)) (lambda (m) (setq reply m)))
      (copilot-ide-tests--wait (lambda () reply) "the error")
      (should (equal (alist-get 'type reply) "error"))
      (should (string-match-p "no pending diff 42" copilot-ide--last-error))
      (setq reply nil)
      (copilot-ide--send '((type . "status")) (lambda (m) (setq reply m)))
      (copilot-ide-tests--wait (lambda () reply) "the status")
      (should (equal (alist-get 'type reply) "status")))))

(provide 'copilot-ide-tests)
;;; copilot-ide-tests.el ends here
