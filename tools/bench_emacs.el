;;; bench_emacs.el --- What a selection push costs Emacs with copilot-ide-mode on -*- lexical-binding: t; -*-

;;; Commentary:

;; emacs -Q --batch -L DIR-OF-COMPILED-copilot-ide -l tools/bench_emacs.el
;; (or: make bench-emacs, which byte-compiles the package into build/ first).
;;
;; A real bridge runs (COPILOT_HOME is a temporary folder); a 5000-line file with
;; non-BMP characters is visited; a 3-line region in its middle is the selection.
;; Each measure is `benchmark-run' of N calls, printed per call in microseconds,
;; with the part spent in garbage collection shown apart (it depends on the heap
;; and `gc-cons-threshold', i.e. on the user's Emacs, more than on the package):
;;
;; * command: what every command costs (`post-command-hook': arm the timer);
;; * push: the timer's work when the selection changed: read it, encode, send;
;; * unchanged: the timer's work when it did not (compared, not sent).
;;
;; The budget is 0.2 ms for a push.  The machine's load shows in the figures: run
;; it on a quiet machine.

;;; Code:

(require 'copilot-ide)

(let* ((root (file-truename (make-temp-file "copilot-ide-bench" t)))
       (home (make-temp-file "copilot-ide-bench-home" t))
       (process-environment (cons (concat "COPILOT_HOME=" home) process-environment))
       (file (expand-file-name "big.py" root)))
  (with-temp-file file
    (dotimes (i 5000) (insert (format "line %d with some text 😀 and more text here\n" i))))
  (find-file file)
  (set-window-buffer (selected-window) (current-buffer))
  (copilot-ide-mode 1)
  (while (not (copilot-ide--live-p)) (accept-process-output nil 0.05))
  (goto-char (point-min))
  (forward-line 2500)
  (transient-mark-mode 1)
  (set-mark (point))
  (forward-line 3)
  (activate-mark)
  (let ((measures
         (list (cons "command" (byte-compile (lambda ()
                                               (copilot-ide--schedule-selection)
                                               (cancel-timer copilot-ide--selection-timer)
                                               (setq copilot-ide--selection-timer nil))))
               (cons "push" (byte-compile (lambda ()
                                            (setq copilot-ide--last-selection nil
                                                  copilot-ide--last-state nil)
                                            (copilot-ide--send-selection))))
               (cons "unchanged" (byte-compile (lambda () (copilot-ide--send-selection)))))))
    (garbage-collect)
    (dolist (measure measures)
      (let ((r (benchmark-run 2000 (funcall (cdr measure)))))
        (message "%-10s %7.1f us per call (%5.1f us of it in %d garbage collections)"
                 (car measure) (/ (* 1e6 (car r)) 2000) (/ (* 1e6 (nth 2 r)) 2000) (nth 1 r)))))
  (copilot-ide--kill-emacs)
  (set-buffer-modified-p nil)
  (kill-buffer)
  (delete-directory root t)
  (delete-directory home t))

;;; bench_emacs.el ends here
