;;; copilot-ide.el --- GitHub Copilot CLI's /ide integration -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The ide_protocol authors

;; Author: The ide_protocol authors
;; Version: 0.1.0
;; Package-Requires: ((emacs "27.1"))
;; Keywords: tools, convenience
;; URL: https://github.com/ide-protocol/ide-protocol

;; This file is not part of GNU Emacs.

;; This program is free software: you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;; This program is distributed in the hope that it will be useful,
;; but WITHOUT ANY WARRANTY; without even the implied warranty of
;; MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
;; GNU General Public License for more details.

;; You should have received a copy of the GNU General Public License
;; along with this program.  If not, see <https://www.gnu.org/licenses/>.

;;; Commentary:

;; Makes Emacs the IDE of GitHub Copilot CLI's `/ide' feature: the CLI
;; started in your project connects to Emacs, sees the region you
;; selected and the flymake (or flycheck) diagnostics of your buffers,
;; and shows each edit it proposes as a diff in Emacs, where you accept
;; it with C-c C-c or reject it with C-c C-k.
;;
;; Emacs runs no server itself.  `copilot-ide-mode' starts
;; `python3 -m ide_protocol bridge' as a subprocess, on a pipe, and
;; talks to it with one JSON message per line (docs/BRIDGE.md of the
;; ide_protocol project); the bridge serves the protocol, writes the
;; lock file the CLI looks for, and removes it when Emacs stops it.
;;
;; Usage: M-x copilot-ide-mode in a project, then start `copilot' in a
;; terminal in that project's folder.  M-x copilot-ide-status tells
;; what is connected; `copilot-ide-send-file' and
;; `copilot-ide-send-region' put a reference to the file or the region
;; into the CLI's prompt.

;;; Code:

(require 'json)
(require 'subr-x)

(declare-function project-root "project" (project))
(declare-function project-roots "project" (project))
(declare-function project-current "project" (&optional maybe-prompt directory))
(declare-function flymake-diagnostics "flymake" (&optional beg end))
(declare-function flymake-diagnostic-beg "flymake" (diag))
(declare-function flymake-diagnostic-end "flymake" (diag))
(declare-function flymake-diagnostic-type "flymake" (diag))
(declare-function flymake-diagnostic-text "flymake" (diag))
(declare-function flymake-diagnostic-backend "flymake" (diag))
(declare-function flycheck-error-line "ext:flycheck" (err))
(declare-function flycheck-error-column "ext:flycheck" (err))
(declare-function flycheck-error-end-line "ext:flycheck" (err))
(declare-function flycheck-error-end-column "ext:flycheck" (err))
(declare-function flycheck-error-level "ext:flycheck" (err))
(declare-function flycheck-error-message "ext:flycheck" (err))
(declare-function flycheck-error-checker "ext:flycheck" (err))
(defvar flymake-mode)
(defvar flycheck-mode)
(defvar flycheck-current-errors)
(defvar copilot-ide-mode)

(defgroup copilot-ide nil
  "GitHub Copilot CLI's /ide integration."
  :group 'tools
  :prefix "copilot-ide-")

(defconst copilot-ide--directory
  (file-name-directory (or load-file-name buffer-file-name default-directory))
  "The folder this file was loaded from.")

(defcustom copilot-ide-python "python3"
  "The Python 3 interpreter that runs the bridge (Python 3.8 or later)."
  :type 'string)

(defcustom copilot-ide-library-path
  (if (file-directory-p (expand-file-name "ide_protocol" copilot-ide--directory))
      copilot-ide--directory
    (expand-file-name "../.." copilot-ide--directory))
  "The folder that holds the `ide_protocol' Python package.
The default is the folder of this file when the package was built
with `make emacs-package' (the library is copied beside it), else
the checkout this file sits in, so a clone works with no install."
  :type 'directory)

(defcustom copilot-ide-name "Emacs"
  "The IDE name the CLI shows for this Emacs."
  :type 'string)

(defcustom copilot-ide-diff-style 'unified
  "How a proposed edit is shown.
`unified': a unified diff in `diff-mode'; `proposed': the proposed
text of the file, in the file's major mode."
  :type '(choice (const :tag "Unified diff" unified)
                 (const :tag "Proposed text" proposed)))

(defcustom copilot-ide-display-buffer-action
  '((display-buffer-reuse-window display-buffer-pop-up-window)
    (inhibit-same-window . t))
  "The `display-buffer' action that shows a proposed diff.
The diff is shown, never selected: the selected window keeps point."
  :type 'sexp)

(defcustom copilot-ide-selection-delay 0.1
  "Seconds between a command and the selection it leaves being sent."
  :type 'number)

(defcustom copilot-ide-diagnostics-interval 1.0
  "Seconds between two looks at the flymake diagnostics of buffers.
Flymake in Emacs 28 tells nobody when its diagnostics change."
  :type 'number)

(defcustom copilot-ide-watch-seconds 5.0
  "Seconds a file is watched for the CLI's write after a diff closes."
  :type 'number)

(defcustom copilot-ide-exit-wait 2.0
  "Seconds Emacs waits at exit for the bridge to remove its lock file."
  :type 'number)

(defcustom copilot-ide-trusted nil
  "Non-nil: the lock file marks the project trusted (isTrusted).
Copilot CLI then skips its folder trust prompt for it.  Set it only
for projects you trust: the lock says so to every CLI that reads it."
  :type 'boolean)

(defcustom copilot-ide-bridge-arguments nil
  "More arguments for the bridge, e.g. (\"--trusted\")."
  :type '(repeat string))

;;; State (one bridge per Emacs)

(defvar copilot-ide--process nil "The bridge process.")
(defvar copilot-ide--ready nil "The bridge's `ready' message, once it came.")
(defvar copilot-ide--sessions 0 "How many CLI sessions are connected.")
(defvar copilot-ide--diffs (make-hash-table :test 'eql)
  "Pending diffs: the bridge's id -> the buffer showing the diff.")
(defvar copilot-ide--selection-timer nil "The pending selection send.")
(defvar copilot-ide--diagnostics-timer nil "The repeating diagnostics poll.")
(defvar copilot-ide--last-selection nil "The last selection message sent.")
(defvar copilot-ide--last-state nil
  "What the last selection was read from: buffer, point, mark, text version.")
(defvar copilot-ide--last-error nil "The text of the bridge's last error message.")
(defvar copilot-ide--next-id 0 "Id of the last request that expects a reply.")
(defvar copilot-ide--replies nil "Alist: request id -> function called with the reply.")

(defvar-local copilot-ide--sent-diagnostics nil
  "What was last sent about this buffer's diagnostics: (KEY . SENT).")
(defvar-local copilot-ide--diff nil
  "In a diff buffer: (ID PATH TAB) of the diff it shows.")
(defvar-local copilot-ide--answered nil
  "In a diff buffer: non-nil once the diff was answered or closed.")

;;; JSON lines

(defun copilot-ide--encode (object)
  "OBJECT as one line of JSON (`:null' is null, `:false' is false)."
  (if (fboundp 'json-serialize)         ; Emacs built with libjansson
      (json-serialize object :null-object :null :false-object :false)
    (copilot-ide--encode-json-el object)))

(defun copilot-ide--encode-json-el (object)
  "OBJECT as JSON by json.el, for an Emacs built without libjansson."
  (let ((json-false :false) (json-null :null) (json-encoding-pretty-print nil))
    (json-encode object)))

(defun copilot-ide--decode (string)
  "The message in STRING, an alist (null and false are nil)."
  (if (fboundp 'json-parse-string)
      (json-parse-string string :object-type 'alist :array-type 'list
                         :null-object nil :false-object nil)
    (copilot-ide--decode-json-el string)))

(defun copilot-ide--decode-json-el (string)
  "The message in STRING by json.el, for an Emacs built without libjansson."
  (let ((json-object-type 'alist) (json-array-type 'list) (json-key-type 'symbol)
        (json-false nil) (json-null nil))
    (json-read-from-string string)))

(defun copilot-ide--live-p ()
  "Return non-nil when the bridge is running and said it is ready."
  (and copilot-ide--ready (process-live-p copilot-ide--process)))

(defun copilot-ide--send (message &optional on-reply)
  "Send MESSAGE (an alist) to the bridge.
With ON-REPLY, the message gets an id and ON-REPLY is called with
the bridge's reply (or its error)."
  (when (process-live-p copilot-ide--process)
    (when on-reply
      (setq copilot-ide--next-id (1+ copilot-ide--next-id))
      (push (cons copilot-ide--next-id on-reply) copilot-ide--replies)
      (setq message (cons (cons 'id copilot-ide--next-id) message)))
    (condition-case err
        (progn (process-send-string copilot-ide--process
                                    (concat (copilot-ide--encode message) "\n"))
               t)
      ;; The bridge ended meanwhile: its sentinel tells the user.
      (error (message "copilot-ide: cannot write to the bridge: %s" (error-message-string err))
             nil))))

(defun copilot-ide--filter (process chunk)
  "Split the output CHUNK of PROCESS into lines; handle each complete one.
A chunk may end anywhere, inside a line or a character: the
incomplete end is kept, as a list, and joined once its line ends."
  (let ((start 0) newline)
    (while (setq newline (string-match-p "\n" chunk start))
      (let ((line (apply #'concat (nreverse (cons (substring chunk start newline)
                                                  (process-get process 'partial))))))
        (process-put process 'partial nil)
        (when (eq process copilot-ide--process)
          (copilot-ide--handle-line line)))
      (setq start (1+ newline)))
    (when (< start (length chunk))
      (process-put process 'partial (cons (substring chunk start)
                                          (process-get process 'partial))))))

(defun copilot-ide--handle-line (line)
  "Handle one LINE of the bridge's output; a failure is reported, never raised."
  (condition-case err
      (copilot-ide--handle (copilot-ide--decode line))
    (error (message "copilot-ide: cannot handle a message of the bridge: %s"
                    (error-message-string err)))))

(defun copilot-ide--handle (msg)
  "Act on MSG, one message of the bridge."
  (let* ((type (alist-get 'type msg))
         (id (alist-get 'id msg))
         (on-reply (and id (assq id copilot-ide--replies))))
    (when on-reply
      (setq copilot-ide--replies (delq on-reply copilot-ide--replies)))
    (pcase type
      ((or "ready" "lock")
       (setq copilot-ide--ready msg)
       (when (equal type "ready")
         (message "copilot-ide: serving %s" (string-join (alist-get 'folders msg) ", "))))
      ((or "connected" "disconnected")
       (setq copilot-ide--sessions (or (alist-get 'sessions msg) 0))
       (force-mode-line-update t))
      ("diff" (copilot-ide--show-diff msg))
      ("dropped"
       (message "copilot-ide: %s messages from the bridge were lost: Emacs did not read them in time \
(a proposed edit among them was rejected)" (alist-get 'messages msg)))
      ("diff_closed" (copilot-ide--diff-closed msg))
      ("error"
       (setq copilot-ide--last-error (alist-get 'message msg))
       (unless on-reply
         (message "copilot-ide: the bridge refused line %s: %s"
                  (alist-get 'line msg) (alist-get 'message msg))))
      ("status" (setq copilot-ide--sessions (length (alist-get 'sessions msg))))
      ("stopped" (setq copilot-ide--ready nil)))
    (when on-reply
      (funcall (cdr on-reply) msg))))

;;; Starting and stopping

(defconst copilot-ide--launcher
  (concat "import sys; sys.path.insert(0, sys.argv.pop(1)); "
          "from ide_protocol.__main__ import main; sys.exit(main(sys.argv[1:]))")
  "The bridge's start: the library first on `sys.path', then its `bridge' command.
Python runs isolated (-I): neither the project's folder (the bridge's
working folder) nor PYTHONPATH is on `sys.path', so a project that
holds an `ide_protocol' folder of its own runs nothing by being opened.")

(defun copilot-ide--root ()
  "The folder to serve: the current project's root, else `default-directory'."
  (let* ((project (and (require 'project nil t) (project-current nil)))
         (root (cond ((null project) default-directory)
                     ((fboundp 'project-root) (project-root project))
                     (t (with-no-warnings (car (project-roots project)))))))
    ;; The CLI compares its physical working folder with the lock's folders.
    (directory-file-name (file-truename (expand-file-name root)))))

(defun copilot-ide--start ()
  "Start the bridge for the current project."
  (when (process-live-p copilot-ide--process)
    (copilot-ide--stop))
  (unless (executable-find copilot-ide-python)
    (error "No program %s (customize `copilot-ide-python')" copilot-ide-python))
  (let* ((root (copilot-ide--root))
         (default-directory (file-name-as-directory root))
         (library (expand-file-name copilot-ide-library-path))
         (stderr (get-buffer-create " *copilot-ide stderr*"))
         (process
          ;; A pipe, not a pty (a pty echoes and limits line length); UTF-8 both
          ;; ways; never asked about at exit (`copilot-ide--kill-emacs' stops it).
          (make-process :name "copilot-ide"
                        :command (append (list copilot-ide-python "-I" "-c" copilot-ide--launcher
                                               library "bridge" root "--name" copilot-ide-name)
                                         (and copilot-ide-trusted (list "--trusted"))
                                         copilot-ide-bridge-arguments)
                        :connection-type 'pipe
                        :coding 'utf-8-unix
                        :noquery t
                        :stderr stderr
                        :filter #'copilot-ide--filter
                        :sentinel #'copilot-ide--sentinel)))
    (let ((stderr-process (get-buffer-process stderr)))
      (when stderr-process
        (set-process-query-on-exit-flag stderr-process nil)))
    (setq copilot-ide--process process
          copilot-ide--ready nil
          copilot-ide--sessions 0
          copilot-ide--last-selection nil
          copilot-ide--last-state nil
          copilot-ide--replies nil)
    (copilot-ide--send `((type . "hello") (protocol . 1) (unit . "codepoints")
                         (name . ,copilot-ide-name)
                         (unified_diff . ,(if (eq copilot-ide-diff-style 'unified) t :false))))
    (add-hook 'post-command-hook #'copilot-ide--schedule-selection)
    (add-hook 'kill-emacs-hook #'copilot-ide--kill-emacs)
    (add-hook 'flycheck-after-syntax-check-hook #'copilot-ide--sync-diagnostics)
    (add-hook 'kill-buffer-hook #'copilot-ide--buffer-killed)
    (setq copilot-ide--diagnostics-timer
          (run-with-timer copilot-ide-diagnostics-interval copilot-ide-diagnostics-interval
                          #'copilot-ide--poll-diagnostics))
    process))

(defun copilot-ide--stop ()
  "Stop the bridge without waiting: close its input, which ends it and its lock.
A bridge still running a few seconds later is killed."
  (remove-hook 'post-command-hook #'copilot-ide--schedule-selection)
  (remove-hook 'flycheck-after-syntax-check-hook #'copilot-ide--sync-diagnostics)
  (remove-hook 'kill-buffer-hook #'copilot-ide--buffer-killed)
  (dolist (timer (list copilot-ide--selection-timer copilot-ide--diagnostics-timer))
    (when timer (cancel-timer timer)))
  (setq copilot-ide--selection-timer nil copilot-ide--diagnostics-timer nil)
  ;; Pending diffs: the bridge answers them as the editor gone (client_disconnected).
  (maphash (lambda (_id buffer) (copilot-ide--kill-diff-buffer buffer)) copilot-ide--diffs)
  (clrhash copilot-ide--diffs)
  (dolist (buffer (buffer-list))
    (when (buffer-local-value 'copilot-ide--sent-diagnostics buffer)
      (with-current-buffer buffer (setq copilot-ide--sent-diagnostics nil))))
  (let ((process copilot-ide--process))
    (setq copilot-ide--process nil
          copilot-ide--ready nil
          copilot-ide--sessions 0)
    (when (process-live-p process)
      (ignore-errors (process-send-eof process))
      (run-with-timer 5 nil (lambda ()
                              (when (process-live-p process)
                                (delete-process process)))))
    process))

(defun copilot-ide--kill-emacs ()
  "Stop the bridge as Emacs exits, and wait (briefly) until its lock is gone.
Emacs signals its subprocesses at exit; the bridge removes its lock
on SIGHUP too, but ending its input first lets it end its sessions."
  (let ((lock (alist-get 'lock copilot-ide--ready))
        (process (copilot-ide--stop))
        (deadline (+ (float-time) copilot-ide-exit-wait)))
    (when (process-live-p process)
      (while (and (process-live-p process)
                  (or (null lock) (file-exists-p lock))
                  (< (float-time) deadline))
        (accept-process-output process 0.05)))))

(defun copilot-ide--sentinel (process event)
  "Report the bridge PROCESS's end (EVENT) when it was not asked to stop.
The report waits a moment for the end of its stderr (a pipe of its own)."
  (when (and (eq process copilot-ide--process) (not (process-live-p process)))
    (setq copilot-ide--process nil)
    (when copilot-ide-mode
      (copilot-ide-mode -1))
    (run-with-timer 0.2 nil #'copilot-ide--report-end (string-trim event))))

(defun copilot-ide--report-end (event)
  "Tell the user the bridge ended (EVENT), with the end of what it wrote on stderr."
  (let ((stderr (get-buffer " *copilot-ide stderr*")))
    (message "copilot-ide: the bridge ended (%s)%s" event
             (if stderr
                 (concat ": " (with-current-buffer stderr
                                (string-trim (buffer-substring-no-properties
                                              (max (point-min) (- (point-max) 300))
                                              (point-max)))))
               ""))))

;;;###autoload
(define-minor-mode copilot-ide-mode
  "Serve GitHub Copilot CLI's /ide from Emacs (a global minor mode).
On, it starts the bridge for the current project (its root, else
`default-directory'): a CLI started there connects to Emacs.  Off,
it stops the bridge (its lock file is removed)."
  :global t
  :group 'copilot-ide
  :lighter (:eval (copilot-ide--lighter))
  (if (not copilot-ide-mode)
      (copilot-ide--stop)
    (condition-case err
        (copilot-ide--start)
      (error
       (copilot-ide--stop)
       (setq copilot-ide-mode nil)
       (message "copilot-ide: cannot start the bridge (%s): %s"
                copilot-ide-python (error-message-string err))))))

(defun copilot-ide--lighter ()
  "The mode line's word: connected (with the session count) or waiting."
  (cond ((not (copilot-ide--live-p)) " Copilot[off]")
        ((> copilot-ide--sessions 0) (format " Copilot[%d]" copilot-ide--sessions))
        (t " Copilot[-]")))

;;;###autoload
(defun copilot-ide-status ()
  "Tell what the bridge serves and who is connected; return the text."
  (interactive)
  (let ((text (if (not (copilot-ide--live-p))
                  "copilot-ide: not running (M-x copilot-ide-mode)"
                (format "copilot-ide: serving %s, lock %s, CLI sessions connected: %d, pending diffs: %d"
                        (string-join (alist-get 'folders copilot-ide--ready) ", ")
                        (alist-get 'lock copilot-ide--ready)
                        copilot-ide--sessions (hash-table-count copilot-ide--diffs)))))
    (when (copilot-ide--live-p)
      (copilot-ide--send '((type . "status")) #'ignore))
    (when (called-interactively-p 'interactive)
      (message "%s" text))
    text))

;;; Positions: Emacs counts code points, as the hello said

(defvar copilot-ide--line-cache nil
  "The last line numbered: (BUFFER TICK LINE-START LINE), its number 0-based.")

(defun copilot-ide--line-number (bol)
  "Return the 0-based number of the line beginning at BOL (buffer widened).
Counted from the line numbered last when the text did not change
since (point moves by a few lines between two commands), else
from the start of the buffer."
  (let* ((cache copilot-ide--line-cache)
         (tick (buffer-chars-modified-tick))
         (line (if (and cache (eq (nth 0 cache) (current-buffer)) (eql (nth 1 cache) tick))
                   (let ((from (nth 2 cache)))
                     (if (<= from bol)
                         (+ (nth 3 cache) (count-lines from bol))
                       (- (nth 3 cache) (count-lines bol from))))
                 (1- (line-number-at-pos bol t)))))
    (setq copilot-ide--line-cache (list (current-buffer) tick bol line))
    line))

(defun copilot-ide--position (pos lines)
  "POS as a bridge position; its line's text is added to LINES (an alist).
Returns (POSITION . LINES)."
  (save-excursion
    (goto-char pos)
    (let* ((bol (line-beginning-position))
           (line (copilot-ide--line-number bol))
           (key (intern (number-to-string line))))
      (unless (assq key lines)
        (push (cons key (buffer-substring-no-properties bol (line-end-position))) lines))
      (cons `((line . ,line) (character . ,(- pos bol))) lines))))

(defun copilot-ide--range (beg end)
  "BEG and END as `(start END-POSITION lines)' fields of a message."
  (save-restriction
    (widen)
    (let* ((start (copilot-ide--position beg nil))
           (stop (copilot-ide--position end (cdr start))))
      `((start . ,(car start)) (end . ,(car stop)) (lines . ,(cdr stop))))))

(defun copilot-ide--selection-message ()
  "The selection message of the selected window, or nil (not a file)."
  (let* ((window (selected-window))
         (buffer (window-buffer window))
         (file (buffer-file-name buffer)))
    (when file
      (with-current-buffer buffer
        (let* ((point (window-point window))
               (active (region-active-p))
               (beg (if active (region-beginning) point))
               (end (if active (region-end) point)))
          `((type . "selection") (path . ,(expand-file-name file))
            (text . ,(if active (buffer-substring-no-properties beg end) ""))
            ,@(copilot-ide--range beg end)))))))

(defun copilot-ide--schedule-selection ()
  "After a command: send the selection soon (one timer, however many commands)."
  (unless copilot-ide--selection-timer
    (setq copilot-ide--selection-timer
          (run-with-timer copilot-ide-selection-delay nil #'copilot-ide--send-selection))))

(defun copilot-ide--send-selection ()
  "Send the selected window's selection when it changed.
Nothing is read when the buffer, point, the active mark and the text
are those of last time (most commands move nothing)."
  (setq copilot-ide--selection-timer nil)
  (when (copilot-ide--live-p)
    (let* ((window (selected-window))
           (buffer (window-buffer window))
           (state (with-current-buffer buffer
                    (list buffer (window-point window) (and mark-active (mark t))
                          (buffer-chars-modified-tick)))))
      (unless (equal state copilot-ide--last-state)
        (setq copilot-ide--last-state state)
        (let ((msg (copilot-ide--selection-message)))
          (when (and msg (not (equal msg copilot-ide--last-selection)))
            (setq copilot-ide--last-selection msg)
            (copilot-ide--send msg)))))))

;;; References

(defun copilot-ide--reference-reply (reply)
  "Tell the user where a reference went (REPLY: the bridge's answer)."
  (if (equal (alist-get 'type reply) "sent")
      (message "copilot-ide: sent to %d CLI session(s)" (alist-get 'sessions reply))
    (message "copilot-ide: %s" (alist-get 'message reply))))

(defun copilot-ide--file ()
  "The current buffer's file, or a user error."
  (or (and buffer-file-name (expand-file-name buffer-file-name))
      (user-error "This buffer visits no file")))

;;;###autoload
(defun copilot-ide-send-file ()
  "Put a reference to the current file into the CLI's prompt."
  (interactive)
  (unless (copilot-ide--live-p) (user-error "Turn on `copilot-ide-mode' first"))
  (copilot-ide--send `((type . "add_file") (path . ,(copilot-ide--file)))
                     #'copilot-ide--reference-reply))

;;;###autoload
(defun copilot-ide-send-region (beg end)
  "Put a reference to the region (BEG to END) of this file into the CLI's prompt."
  (interactive "r")
  (unless (copilot-ide--live-p) (user-error "Turn on `copilot-ide-mode' first"))
  (copilot-ide--send `((type . "add_file") (path . ,(copilot-ide--file))
                       (text . ,(buffer-substring-no-properties beg end))
                       ,@(copilot-ide--range beg end))
                     #'copilot-ide--reference-reply))

;;; Diagnostics

(defun copilot-ide--flymake-severity (type)
  "The wire's severity of the flymake diagnostic TYPE."
  (let ((category (and (symbolp type) (get type 'flymake-category))))
    (cond ((memq type '(:error eglot-error)) "Error")
          ((memq type '(:warning eglot-warning)) "Warning")
          ((eq category 'flymake-error) "Error")
          ((eq category 'flymake-warning) "Warning")
          (t "Information"))))

(defun copilot-ide--flycheck-severity (level)
  "The wire's severity of the flycheck error LEVEL."
  (pcase level ('error "Error") ('warning "Warning") (_ "Information")))

(defun copilot-ide--diagnostic-items ()
  "The current buffer's diagnostics: a list of (BEG END SEVERITY TEXT SOURCE)."
  (let (items)
    (when (and (bound-and-true-p flymake-mode) (fboundp 'flymake-diagnostics))
      (dolist (d (flymake-diagnostics))
        (push (list (flymake-diagnostic-beg d) (flymake-diagnostic-end d)
                    (copilot-ide--flymake-severity (flymake-diagnostic-type d))
                    (flymake-diagnostic-text d)
                    (format "%s" (flymake-diagnostic-backend d)))
              items)))
    (when (and (bound-and-true-p flycheck-mode) (boundp 'flycheck-current-errors))
      (save-restriction
        (widen)
        (dolist (err flycheck-current-errors)
          (let* ((beg (copilot-ide--line-column (flycheck-error-line err) (flycheck-error-column err)))
                 (end-line (and (fboundp 'flycheck-error-end-line) (flycheck-error-end-line err)))
                 (end (if end-line
                          (copilot-ide--line-column end-line (flycheck-error-end-column err))
                        beg)))
            (push (list beg end (copilot-ide--flycheck-severity (flycheck-error-level err))
                        (flycheck-error-message err) (format "%s" (flycheck-error-checker err)))
                  items)))))
    (nreverse items)))

(defun copilot-ide--line-column (line column)
  "The buffer position of 1-based LINE and 1-based COLUMN (nil: the line's start)."
  (save-excursion
    (goto-char (point-min))
    (forward-line (1- (or line 1)))
    (min (+ (point) (max 0 (1- (or column 1)))) (line-end-position))))

(defun copilot-ide--sync-diagnostics (&optional buffer)
  "Send the diagnostics of BUFFER (default: the current one) when they changed."
  (with-current-buffer (or buffer (current-buffer))
    (when (and buffer-file-name (copilot-ide--live-p))
      (let ((items (copilot-ide--diagnostic-items)))
        (unless (equal items (car copilot-ide--sent-diagnostics))
          (let (diagnostics lines)
            (save-restriction
              (widen)
              (dolist (item items)
                (let* ((beg (copilot-ide--position (nth 0 item) lines))
                       (end (copilot-ide--position (nth 1 item) (cdr beg))))
                  (setq lines (cdr end))
                  (push `((message . ,(nth 3 item)) (severity . ,(nth 2 item))
                          (start . ,(car beg)) (end . ,(car end)) (source . ,(nth 4 item)))
                        diagnostics))))
            (copilot-ide--send `((type . "diagnostics") (path . ,(expand-file-name buffer-file-name))
                                 (diagnostics . ,(vconcat (nreverse diagnostics)))
                                 ,@(and lines `((lines . ,lines)))))
            (setq copilot-ide--sent-diagnostics (cons items t))))))))

(defun copilot-ide--poll-diagnostics ()
  "Send the diagnostics of every file buffer whose diagnostics changed."
  (dolist (buffer (buffer-list))
    (when (and (buffer-file-name buffer)
               (or (buffer-local-value 'copilot-ide--sent-diagnostics buffer)
                   (and (boundp 'flymake-mode) (buffer-local-value 'flymake-mode buffer))
                   (and (boundp 'flycheck-mode) (buffer-local-value 'flycheck-mode buffer))))
      (copilot-ide--sync-diagnostics buffer))))

(defun copilot-ide--buffer-killed ()
  "A file buffer with diagnostics sent is killed: its diagnostics are cleared."
  (when (and (car copilot-ide--sent-diagnostics) buffer-file-name (copilot-ide--live-p))
    (copilot-ide--send `((type . "diagnostics") (path . ,(expand-file-name buffer-file-name))
                         (diagnostics . [])))))

;;; Diffs

(defvar copilot-ide-diff-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c C-c") #'copilot-ide-accept)
    (define-key map (kbd "C-c C-k") #'copilot-ide-reject)
    map)
  "Keys of a buffer showing a proposed diff.")

(define-minor-mode copilot-ide-diff-mode
  "A buffer showing an edit the CLI proposes.
\\<copilot-ide-diff-mode-map>
\\[copilot-ide-accept] accepts it (the CLI then writes the file),
\\[copilot-ide-reject] rejects it; killing the buffer rejects it."
  :lighter " Copilot-Diff"
  :keymap copilot-ide-diff-mode-map
  (if copilot-ide-diff-mode
      (add-hook 'kill-buffer-hook #'copilot-ide--diff-buffer-killed nil t)
    (remove-hook 'kill-buffer-hook #'copilot-ide--diff-buffer-killed t)))

(defun copilot-ide--local-path-p (path)
  "Non-nil when PATH, a file name from the CLI, is a plain local absolute one.
The CLI's text is untrusted: a remote name (TRAMP's /ssh:host:..., also
once expanded, as in /tmp/../ssh:host:...) given to a file function
would open a connection, and a relative one or ~ would name a file
of Emacs's choosing.  Only names passing this are given to file functions."
  (and (stringp path)
       (file-name-absolute-p path)
       (not (string-prefix-p "~" path))
       (not (file-remote-p path))
       ;; Expanded without handlers: expanding is itself a file operation.
       (not (file-remote-p (let ((file-name-handler-alist nil)) (expand-file-name path "/"))))))

(defun copilot-ide--proposal-mode (path)
  "The major mode to show a proposed text for PATH in: a programming one, else nil.
The mode comes from `auto-mode-alist' by the CLI's (untrusted) name, and
the text is untrusted too.  Modes derived from `prog-mode' only colour
the text; others may act on it (`org-mode' reads the files its
#+SETUPFILE names, `archive-mode' parses it), so they are not run."
  (let ((mode (assoc-default path auto-mode-alist #'string-match)))
    (when (and mode (symbolp mode) (fboundp mode))
      ;; An autoloaded mode says its parent once loaded: loading is what
      ;; visiting such a file does, running the mode is not.
      (when (autoloadp (symbol-function mode))
        (autoload-do-load (symbol-function mode) mode))
      (and (provided-mode-derived-p mode 'prog-mode) mode))))

(defun copilot-ide--show-diff (msg)
  "Show the diff of MSG in a buffer of its own, without selecting it.
The diff is registered first: if showing it fails it is rejected (the
CLI would otherwise wait for an answer no one can give)."
  (let* ((id (alist-get 'id msg))
         (path (alist-get 'path msg))
         (unified (alist-get 'unified msg))
         (buffer (generate-new-buffer (format "*copilot-ide diff: %s*" (file-name-nondirectory path)))))
    (puthash id buffer copilot-ide--diffs)
    (condition-case err
        (with-current-buffer buffer
          (insert (if (and unified (eq copilot-ide-diff-style 'unified)) unified (alist-get 'new msg)))
          (if (and unified (eq copilot-ide-diff-style 'unified))
              (diff-mode)
            (let ((mode (copilot-ide--proposal-mode path)))
              (when mode
                (delay-mode-hooks (funcall mode)))))
          (setq copilot-ide--diff (list id path (alist-get 'tab msg)))
          (copilot-ide-diff-mode 1)
          (when (and (assq 'original_exact msg) (not (alist-get 'original_exact msg)))
            (setq header-line-format
                  "The file is not UTF-8: its invalid bytes read as U+FFFD here; accepting replaces them"))
          (set-buffer-modified-p nil)
          (setq buffer-read-only t)
          (goto-char (point-min))
          ;; Shown from a timer, at top level: a filter may run inside another command's
          ;; `save-window-excursion' (anything that waits for output), which would undo it.
          (run-with-timer 0 nil #'copilot-ide--display-diff buffer))
      (error
       (remhash id copilot-ide--diffs)
       (copilot-ide--send `((type . "diff_answer") (diff . ,id) (accept . :false)))
       (copilot-ide--kill-diff-buffer buffer)
       (message "copilot-ide: cannot show the edit of %s the CLI proposes, so it is rejected: %s"
                path (error-message-string err))))))

(defun copilot-ide--display-diff (buffer)
  "Show the diff BUFFER (still pending) without selecting it."
  (when (buffer-live-p buffer)
    (display-buffer buffer copilot-ide-display-buffer-action)
    (message "copilot-ide: the CLI proposes an edit of %s: C-c C-c in %s accepts, C-c C-k rejects"
             (let ((path (nth 1 (buffer-local-value 'copilot-ide--diff buffer))))
               (if (copilot-ide--local-path-p path) (abbreviate-file-name path) path))
             (buffer-name buffer))))

(defun copilot-ide--pending-diff-buffer ()
  "The diff buffer to answer: the current one, else the newest pending diff's."
  (if copilot-ide--diff
      (current-buffer)
    (let (newest)
      (maphash (lambda (id buffer) (when (or (null newest) (> id (car newest)))
                                     (setq newest (cons id buffer))))
               copilot-ide--diffs)
      (or (cdr newest) (user-error "No diff of Copilot CLI is waiting")))))

(defun copilot-ide--answer (accept)
  "Answer the diff shown here, else the newest: ACCEPT it or not."
  (let ((buffer (copilot-ide--pending-diff-buffer)))
    (with-current-buffer buffer
      (when copilot-ide--answered
        (user-error "This diff is already answered"))
      (copilot-ide--send `((type . "diff_answer") (diff . ,(car copilot-ide--diff))
                           (accept . ,(if accept t :false))))
      (setq copilot-ide--answered t))
    (remhash (car (buffer-local-value 'copilot-ide--diff buffer)) copilot-ide--diffs)
    (copilot-ide--kill-diff-buffer buffer)))

;;;###autoload
(defun copilot-ide-accept ()
  "Accept the proposed edit shown here (else the newest one): the CLI writes it."
  (interactive)
  (copilot-ide--answer t))

;;;###autoload
(defun copilot-ide-reject ()
  "Reject the proposed edit shown here (else the newest one)."
  (interactive)
  (copilot-ide--answer nil))

(defun copilot-ide--kill-diff-buffer (buffer)
  "Kill the diff BUFFER without answering (it was answered, or closed)."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (setq copilot-ide--answered t))
    (dolist (window (get-buffer-window-list buffer nil t))
      (when (window-live-p window)
        (quit-restore-window window 'bury)))
    (kill-buffer buffer)))

(defun copilot-ide--diff-buffer-killed ()
  "A diff buffer is killed before it was answered: that rejects the diff."
  (when (and copilot-ide--diff (not copilot-ide--answered))
    (setq copilot-ide--answered t)
    (remhash (car copilot-ide--diff) copilot-ide--diffs)
    (copilot-ide--send `((type . "diff_answer") (diff . ,(car copilot-ide--diff)) (accept . :false)))))

(defun copilot-ide--diff-closed (msg)
  "The diff of MSG is closed (answered here, in the CLI, or the CLI left).
Its buffer goes; its file is watched, since the CLI writes it after
an accept and after a yes in the terminal alike."
  (let ((buffer (gethash (alist-get 'id msg) copilot-ide--diffs)))
    (remhash (alist-get 'id msg) copilot-ide--diffs)
    (copilot-ide--kill-diff-buffer buffer)
    (copilot-ide--watch-file (alist-get 'path msg))))

(defvar copilot-ide--watched nil
  "Buffers watched for the CLI's writes: an alist of (BUFFER . DEADLINE).")
(defvar copilot-ide--watch-timer nil "The timer that looks at watched buffers.")

(defun copilot-ide--watch-file (path)
  "Revert the buffer visiting PATH whenever its file is written, for a few seconds.
A buffer with unsaved changes is reverted only when the user says so.
PATH comes from the CLI: anything but a plain local name is not looked up."
  (let ((buffer (and (copilot-ide--local-path-p path) (find-buffer-visiting path))))
    (when buffer
      (setf (alist-get buffer copilot-ide--watched) (+ (float-time) copilot-ide-watch-seconds))
      (unless copilot-ide--watch-timer
        (setq copilot-ide--watch-timer (run-with-timer 0.1 0.1 #'copilot-ide--look-at-watched))))))

(defun copilot-ide--look-at-watched ()
  "Revert each watched buffer whose file changed; forget those watched long enough."
  (dolist (entry copilot-ide--watched)
    (let ((buffer (car entry)))
      (cond ((or (not (buffer-live-p buffer)) (> (float-time) (cdr entry)))
             (setq copilot-ide--watched (delq entry copilot-ide--watched)))
            ((and (buffer-file-name buffer) (file-exists-p (buffer-file-name buffer))
                  (not (verify-visited-file-modtime buffer)))
             (with-current-buffer buffer
               (if (or (not (buffer-modified-p))
                       (progn
                         ;; Asked once: not again while the question is open.
                         (setq copilot-ide--watched (delq entry copilot-ide--watched))
                         (yes-or-no-p (format "Copilot CLI changed %s; discard your unsaved changes? "
                                              (file-name-nondirectory buffer-file-name)))))
                   (revert-buffer t t t)))))))
  (unless copilot-ide--watched
    (when copilot-ide--watch-timer
      (cancel-timer copilot-ide--watch-timer))
    (setq copilot-ide--watch-timer nil)))

(provide 'copilot-ide)
;;; copilot-ide.el ends here
