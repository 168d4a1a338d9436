// A replica of VS Code Copilot Chat's `/ide` server, rebuilt from its source, for the test
// suite: `check` is run against it, and each behaviour docs/PROTOCOL.md attributes to VS
// Code is asserted against it (tests/test_vscode_replica.py).
//
// Source: microsoft/vscode-copilot-chat at 31acd00 (2026-03-29),
// src/extension/chatSessions/copilotcli/vscode-node/ (below: IPS = inProcHttpServer.ts, and
// the other files by their names under that folder), on the packages its package-lock.json
// pins: @modelcontextprotocol/sdk 1.26.0, express 5.2.1, zod 3.25.76 (installed by
// `make vscode-replica` into .vscode-replica/, tests/vscode_replica/install.sh). Only the
// editor is a stand-in (`vscode` below: a selection, diagnostics, a workspace); the HTTP
// server, the sessions, the tools and the diff registry are VS Code's logic on VS Code's
// packages. Where this file and VS Code's source disagree, this file is wrong: each part
// cites the lines it follows.
//
//   NODE_PATH=.vscode-replica/node_modules node tests/vscode_replica/replica.js \
//       [--variant app|routes] [--folder DIR]... [--editor JSON]
//
// --variant app (the default): the nonce check is app-wide middleware, after
//   express.json() (IPS:119-122 at 31acd00). --variant routes: the nonce check sits on each
//   /mcp route only (the copy in microsoft/vscode at 167b347c,
//   extensions/copilot/.../inProcHttpServer.ts:119-125), so another path gets Express's 404
//   before any nonce check.
// --editor JSON: the editor's state: {"selection": {"filePath", "text", "start": [l, c],
//   "end": [l, c]} | null, "diagnostics": [{"filePath", "items": [{"message", "severity"
//   (0-3, vscode.DiagnosticSeverity), "start", "end", "source", "code"}]}]}.
//
// The lock goes where VS Code writes it: $XDG_STATE_HOME/.copilot/ide, else
// ~/.copilot/ide (node/cliHelpers.ts:18-21). One JSON line on stdout once the lock is
// written: {"lock", "socket", "pid", "versions"}. Commands on stdin, one JSON object a
// line, stand for the user in the editor: {"accept": TAB} / {"reject": TAB} (the diff
// tab's buttons, commands/diffCommands.ts), {"select": SELECTION} (the user selects:
// tools/push/selectionChanged.ts), {"diagnostics": [...], "changed": [paths]} (a language
// server reports: tools/push/diagnosticsChanged.ts), {"folders": [...]} (the workspace
// changes: contribution.ts:93-96), {"send_context": SESSION} (the user's "add selection"
// command, that session picked: commands/sendContext.ts). At start the stale locks of
// the lock folder are removed, whoever wrote them (contribution.ts:58). The process
// exits when stdin closes, removing its lock and socket as VS Code's disposables do
// (contribution.ts:103, IPS:137-151).
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const fsp = require('node:fs/promises');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const url = require('node:url');

const expressApp = require('express');
const { z } = require('zod');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { isInitializeRequest } = require('@modelcontextprotocol/sdk/types.js');

// ------------------------------------------------------------------ arguments

const args = process.argv.slice(2);
let variant = 'app';
const folders = [];
let editor = { selection: null, diagnostics: [] };
for (let i = 0; i < args.length; i++) {
	if (args[i] === '--variant') { variant = args[++i]; }
	else if (args[i] === '--folder') { folders.push(path.resolve(args[++i])); }
	else if (args[i] === '--editor') { editor = JSON.parse(args[++i]); }
	else { console.error(`replica.js: unknown argument ${args[i]}`); process.exit(2); }
}
if (variant !== 'app' && variant !== 'routes') {
	console.error('replica.js: --variant is app or routes');
	process.exit(2);
}

// ------------------------------------------------------------------ the editor (a stand-in for `vscode`)

const generateUuid = () => crypto.randomUUID();

class Uri {
	constructor(scheme, fsPath, query) { this.scheme = scheme; this.fsPath = fsPath; this.query = query || ''; }
	static file(p) { return new Uri('file', p); }
	static parse(text) { return text.startsWith('file:') ? Uri.file(url.fileURLToPath(text)) : new Uri('unknown', text); }
	get path() { return this.scheme === 'file' ? url.pathToFileURL(this.fsPath).pathname : this.fsPath; }
	toString() {
		if (this.scheme !== 'file') { return `${this.scheme}:${this.path}${this.query ? '?' + this.query : ''}`; }
		return url.pathToFileURL(this.fsPath).href;
	}
}

// vscode.DiagnosticSeverity: a numeric enum, so that `DiagnosticSeverity[0]` is 'Error'.
const DiagnosticSeverity = { Error: 0, Warning: 1, Information: 2, Hint: 3, 0: 'Error', 1: 'Warning', 2: 'Information', 3: 'Hint' };

function textOf(filePath, start, end) {
	try {
		const lines = fs.readFileSync(filePath, 'utf-8').split('\n');
		if (start[0] === end[0]) { return (lines[start[0]] || '').slice(start[1], end[1]); }
		return [(lines[start[0]] || '').slice(start[1]), ...lines.slice(start[0] + 1, end[0]),
			(lines[end[0]] || '').slice(0, end[1])].join('\n');
	} catch { return ''; }
}

function textEditor(sel) {
	const uri = Uri.file(sel.filePath);
	const pos = (p) => ({ line: p[0], character: p[1] });
	return {
		document: { uri, getText: () => textOf(sel.filePath, sel.start, sel.end) },
		selection: { start: pos(sel.start), end: pos(sel.end), isEmpty: sel.start[0] === sel.end[0] && sel.start[1] === sel.end[1] },
	};
}

const vscode = {
	version: '1.114.0',
	env: { appName: 'Visual Studio Code', appRoot: '/usr/share/code/resources/app', language: 'en',
		machineId: 'replica-machine', sessionId: generateUuid(), uriScheme: 'vscode', shell: '/bin/bash' },
	window: { activeTextEditor: editor.selection ? textEditor(editor.selection) : undefined },
	workspace: { isTrusted: false },
	DiagnosticSeverity,
	Uri,
	languages: {
		getDiagnostics(uri) {
			const all = (editor.diagnostics || []).map(f => [Uri.file(f.filePath), f.items.map(d => ({
				message: d.message, severity: d.severity, source: d.source, code: d.code,
				range: { start: { line: d.start[0], character: d.start[1] }, end: { line: d.end[0], character: d.end[1] } },
			}))]);
			if (uri === undefined) { return all; }
			const found = all.find(([u]) => u.toString() === uri.toString());
			return found ? found[1] : [];
		},
	},
};

// util/vs/base/common/async.ts Delayer: each trigger replaces the task and restarts the
// wait; the last task runs `delay` ms after the last trigger.
class Delayer {
	constructor(delay) { this.delay = delay; this.timer = null; }
	trigger(task) {
		if (this.timer) { clearTimeout(this.timer); }
		this.timer = setTimeout(() => { this.timer = null; task(); }, this.delay);
	}
	dispose() { if (this.timer) { clearTimeout(this.timer); } }
}

// ------------------------------------------------------------------ diffState.ts

class DiffStateManager {
	constructor() { this._activeDiffs = new Map(); }                     // diffState.ts:25
	register(diff) { this._activeDiffs.set(diff.diffId, diff); }        // diffState.ts:29-34
	unregister(diffId) { this._activeDiffs.delete(diffId); }            // diffState.ts:36-42
	getByTabName(tabName) {                                             // diffState.ts:44-51: the first (oldest) match
		for (const diff of this._activeDiffs.values()) {
			if (diff.tabName === tabName) { return diff; }
		}
		return undefined;
	}
	closeAllForSession(sessionId) {                                     // diffState.ts:84-95
		const toClose = [];
		for (const diff of this._activeDiffs.values()) {
			if (diff.sessionId === sessionId) { toClose.push(diff); }
		}
		for (const diff of toClose) { diff.resolve({ status: 'REJECTED', trigger: 'client_disconnected' }); }
	}
}

// ------------------------------------------------------------------ tools/*.ts

// tools/utils.ts:6-15
function makeTextResult(data) {
	return { content: [{ type: 'text', text: typeof data === 'string' ? data : (JSON.stringify(data, null, 2) ?? String(data)) }] };
}

// tools/getSelection.ts:22-37
function getSelectionInfo(textEditor) {
	const document = textEditor.document;
	const selection = textEditor.selection;
	return {
		text: document.getText(selection),
		filePath: document.uri.fsPath,
		fileUrl: document.uri.toString(),
		selection: {
			start: { line: selection.start.line, character: selection.start.character },
			end: { line: selection.end.line, character: selection.end.character },
			isEmpty: selection.isEmpty,
		},
	};
}

class SelectionState {                                                  // tools/getSelection.ts:39-49
	constructor() { this._latestSelection = null; }
	update(selection) { this._latestSelection = selection; }
	get latest() { return this._latestSelection; }
}

function registerTools(server, diffState, selectionState, sessionId) {  // tools/index.ts:21-30
	// tools/getVscodeInfo.ts:11-26
	server.registerTool('get_vscode_info', { description: 'Get information about the current VS Code instance' }, async () => makeTextResult({
		version: vscode.version, appName: vscode.env.appName, appRoot: vscode.env.appRoot, language: vscode.env.language,
		machineId: vscode.env.machineId, sessionId: vscode.env.sessionId, uriScheme: vscode.env.uriScheme, shell: vscode.env.shell,
	}));

	// tools/getSelection.ts:51-67: no inputSchema, so any arguments are accepted
	server.registerTool('get_selection', { description: 'Get text selection. Returns current selection if an editor is active, otherwise returns the latest cached selection. The "current" field indicates if this is from the active editor (true) or cached (false).' }, async () => {
		const textEditor = vscode.window.activeTextEditor;
		if (textEditor) { return makeTextResult({ ...getSelectionInfo(textEditor), current: true }); }
		if (selectionState.latest) { return makeTextResult({ ...selectionState.latest, current: false }); }
		return makeTextResult(null);
	});

	// tools/openDiff.ts:23-177
	server.registerTool('open_diff', {
		description: 'Opens a diff view comparing original file content with new content. Blocks until user accepts, rejects, or closes the diff.',
		inputSchema: {
			original_file_path: z.string().describe('Path to the original file'),
			new_file_contents: z.string().describe('The new file contents to compare against'),
			tab_name: z.string().describe('Name for the diff tab'),
		},
	}, async ({ original_file_path, new_file_contents, tab_name }) => {
		try {
			try {                                                       // openDiff.ts:42-52: a new file diffs against ''
				await fsp.readFile(original_file_path, 'utf-8');
			} catch (err) {
				if (err.code !== 'ENOENT') { throw err; }
			}
			const uniqueSuffix = `${Date.now()}-${generateUuid()}`;    // openDiff.ts:55-60
			const newUri = new Uri('copilot-cli-readonly', original_file_path, `modified-${uniqueSuffix}`);
			// openDiff.ts:77-159: wait for the user (or close_diff, or the session's end);
			// a tab the user closes leaves the promise pending (openDiff.ts:149-153).
			const result = await new Promise(resolve => {
				const diffId = newUri.toString();
				let cleanedUp = false;
				const cleanup = () => {
					if (cleanedUp) { return; }
					cleanedUp = true;
					diffState.unregister(diffId);
				};
				const wrappedResolve = (r) => { cleanup(); resolve(r); };
				diffState.register({ diffId, sessionId, tabName: tab_name, modifiedUri: newUri, newContents: new_file_contents,
					cleanup, resolve: wrappedResolve });
			});
			return makeTextResult({                                    // openDiff.ts:162-170
				success: true,
				result: result.status,
				trigger: result.trigger,
				tab_name: tab_name,
				message: result.status === 'SAVED'
					? `User accepted changes for ${original_file_path}`
					: `User rejected changes for ${original_file_path}`,
			});
		} catch (err) {                                                // openDiff.ts:171-174
			return { content: [{ type: 'text', text: `Failed to open diff: ${err instanceof Error ? err.message : String(err)}` }], isError: true };
		}
	});

	// tools/closeDiff.ts:12-50
	server.registerTool('close_diff', {
		description: 'Closes a diff tab by its tab name. Use this when the client rejects an edit to close the corresponding diff view.',
		inputSchema: {
			tab_name: z.string().describe('The tab name of the diff to close (must match the tab_name used when opening the diff)'),
		},
	}, async ({ tab_name }) => {
		const diff = diffState.getByTabName(tab_name);
		if (!diff) {
			return makeTextResult({ success: true, already_closed: true, tab_name: tab_name,
				message: `No active diff found with tab name "${tab_name}" (may already be closed)` });
		}
		diff.resolve({ status: 'REJECTED', trigger: 'closed_via_tool' });
		return makeTextResult({ success: true, already_closed: false, tab_name: tab_name, message: `Diff "${tab_name}" closed successfully` });
	});

	// tools/getDiagnostics.ts:12-55: severities in lower case (getDiagnostics.ts:41)
	server.registerTool('get_diagnostics', {
		description: 'Gets language diagnostics (errors, warnings, hints) from VS Code',
		inputSchema: {
			uri: z.string().optional().describe('File URI to get diagnostics for. Optional. If not provided, returns diagnostics for all files.'),
		},
	}, async ({ uri }) => {
		let diagnostics;
		if (uri) {
			const fileUri = vscode.Uri.parse(uri);
			diagnostics = [[fileUri, vscode.languages.getDiagnostics(fileUri)]];
		} else {
			diagnostics = vscode.languages.getDiagnostics();
		}
		const result = diagnostics.map(([fileUri, fileDiagnostics]) => ({
			uri: fileUri.toString(),
			filePath: fileUri.fsPath,
			diagnostics: fileDiagnostics.map(d => ({
				message: d.message,
				severity: vscode.DiagnosticSeverity[d.severity].toLowerCase(),
				range: {
					start: { line: d.range.start.line, character: d.range.start.character },
					end: { line: d.range.end.line, character: d.range.end.character },
				},
				source: d.source,
				code: typeof d.code === 'object' ? d.code.value : d.code,
			})),
		})).filter(item => item.diagnostics.length > 0);
		return makeTextResult(result);
	});

	// tools/updateSessionName.ts:12-30
	server.registerTool('update_session_name', {
		description: 'Update the display name for the current CLI session',
		inputSchema: { name: z.string().describe('The new session name') },
	}, async ({ name }) => {
		sessionNames.set(sessionId, name);
		return makeTextResult({ success: true });
	});
}

// ------------------------------------------------------------------ inProcHttpServer.ts

const sessionNames = new Map();                                          // (copilotCLISessionTracker.ts)
const transports = {};                                                   // IPS:51
const diffState = new DiffStateManager();                                // contribution.ts:36
const selectionState = new SelectionState();                             // contribution.ts:38

function registerTransport(sessionId, transport) { transports[sessionId] = transport; }   // IPS:168-172
function unregisterTransport(sessionId) {                                // IPS:174-178 and contribution.ts:53-55
	delete transports[sessionId];
	diffState.closeAllForSession(sessionId);
}

function sendNotification(sessionId, method, params) {                  // IPS:77-93
	const transport = transports[sessionId];
	if (!transport) { return; }
	transport.send({ jsonrpc: '2.0', method, params }).catch(() => {});
}

function broadcastNotification(method, params) {                        // IPS:63-75
	const message = { jsonrpc: '2.0', method, params };
	for (const sessionId in transports) {
		transports[sessionId].send(message).catch(() => {});
	}
}

const nonce = generateUuid();                                            // IPS:107

function authMiddleware(req, res, next) {                                // IPS:184-192
	if (req.headers.authorization !== `Nonce ${nonce}`) {
		res.status(401).send('Unauthorized');
		return;
	}
	next();
}

async function handlePost(req, res) {                                    // IPS:194-285
	const sessionId = req.headers['mcp-session-id'] ?? req.headers['x-copilot-session-id'];
	if (Array.isArray(sessionId) || !sessionId || typeof sessionId !== 'string') {
		res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: Session ID must be a single, defined, string value' }, id: null });
		return;
	}
	let transport;
	const existingTransport = sessionId ? transports[sessionId] : undefined;
	if (sessionId && existingTransport) {
		if (isInitializeRequest(req.body)) {                               // IPS:212-223
			res.status(409).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Conflict: A connection for this session already exists' }, id: null });
			return;
		}
		transport = existingTransport;
	} else if (sessionId && isInitializeRequest(req.body)) {              // IPS:225-270
		transport = new StreamableHTTPServerTransport({
			sessionIdGenerator: () => sessionId,
			onsessioninitialized: (mcpSessionId) => { registerTransport(mcpSessionId, transport); },
			onsessionclosed: (closedSessionId) => { unregisterTransport(closedSessionId); },
			enableDnsRebindingProtection: true,
			allowedHosts: ['localhost'],
		});
		const server = new McpServer({ name: 'vscode-copilot-cli', title: 'VS Code Copilot CLI', version: '0.0.1' });  // IPS:247-251, contribution.ts:72-74
		registerTools(server, diffState, selectionState, sessionId);
		await server.connect(transport);
	} else {                                                             // IPS:271-282
		res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
		return;
	}
	await transport.handleRequest(req, res, req.body);
}

async function handleGetDelete(req, res) {                               // IPS:287-299
	const sessionId = req.headers['mcp-session-id'];
	const transport = sessionId ? transports[sessionId] : undefined;
	if (!sessionId || !transport) {
		res.status(400).send('Invalid or missing session ID');
		return;
	}
	await transport.handleRequest(req, res);
}

async function getRandomSocketPath() {                                   // IPS:302-311
	const tempDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mcp-'));
	await fsp.chmod(tempDir, 0o700);
	return path.join(tempDir, 'mcp.sock');
}

// ------------------------------------------------------------------ commands/sendContext.ts

function sendEditorContextToSession(sessionId) {                         // sendContext.ts:87-115, 48-61
	const textEditor = vscode.window.activeTextEditor;
	if (!textEditor) { return; }
	const selectionInfo = getSelectionInfo(textEditor);
	sendNotification(sessionId, 'add_file_reference', {
		filePath: selectionInfo.filePath,
		fileUrl: selectionInfo.fileUrl,
		selection: selectionInfo.selection.isEmpty ? null : { start: selectionInfo.selection.start, end: selectionInfo.selection.end },
		selectedText: selectionInfo.selection.isEmpty ? null : selectionInfo.text,
	});
}

// ------------------------------------------------------------------ lockFile.ts

function isProcessRunning(pid) {                                         // lockFile.ts:111-118
	try { process.kill(pid, 0); return true; } catch { return false; }
}

async function cleanupStaleLockFiles() {                                 // lockFile.ts:124-154: any writer's lock
	const copilotDir = lockDirectory();
	let files;
	try { files = await fsp.readdir(copilotDir); } catch { return 0; }
	const results = await Promise.all(files.filter(file => file.endsWith('.lock')).map(async (file) => {
		const filePath = path.join(copilotDir, file);
		try {
			const info = JSON.parse(await fsp.readFile(filePath, 'utf-8'));
			if (!isProcessRunning(info.pid)) { await fsp.unlink(filePath); return true; }
		} catch { }
		return false;
	}));
	return results.filter(Boolean).length;
}

function lockDirectory() {                                               // node/cliHelpers.ts:18-21
	const xdgHome = process.env.XDG_STATE_HOME;
	return xdgHome ? path.join(xdgHome, '.copilot', 'ide') : path.join(os.homedir(), '.copilot', 'ide');
}

function lockInfo(socketPath, timestamp) {                               // lockFile.ts:45-56, 86-98
	return { socketPath, scheme: 'unix', headers: { Authorization: `Nonce ${nonce}` }, pid: process.pid,
		ideName: vscode.env.appName, timestamp, workspaceFolders: folders.slice(), isTrusted: vscode.workspace.isTrusted };
}

async function main() {
	await cleanupStaleLockFiles();                                       // contribution.ts:58
	const socketPath = await getRandomSocketPath();
	const app = expressApp();
	app.use(expressApp.json({ limit: '10mb' }));                         // IPS:119
	if (variant === 'app') {
		app.use(authMiddleware);                                         // IPS:120-122 (31acd00)
		app.post('/mcp', handlePost);                                    // IPS:124-126
		app.get('/mcp', handleGetDelete);
		app.delete('/mcp', handleGetDelete);
	} else {
		app.post('/mcp', authMiddleware, handlePost);                    // microsoft/vscode 167b347c, IPS:123-125
		app.get('/mcp', authMiddleware, handleGetDelete);
		app.delete('/mcp', authMiddleware, handleGetDelete);
	}
	const httpServer = app.listen(socketPath);                           // IPS:128
	await new Promise((resolve, reject) => { httpServer.once('listening', resolve); httpServer.once('error', reject); });

	// tools/push/selectionChanged.ts:12-34
	const selectionDelayer = new Delayer(200);
	if (vscode.window.activeTextEditor) { selectionState.update(getSelectionInfo(vscode.window.activeTextEditor)); }
	const onSelection = (textEditor) => selectionDelayer.trigger(() => {
		const selectionInfo = getSelectionInfo(textEditor);
		selectionState.update(selectionInfo);
		broadcastNotification('selection_changed', selectionInfo);
	});
	// tools/push/diagnosticsChanged.ts:25-75: lower-case severities, only the last event's URIs
	const severityToString = (s) => ['error', 'warning', 'information', 'hint'][s] || 'unknown';
	const diagnosticsDelayer = new Delayer(200);
	const onDiagnostics = (uris) => diagnosticsDelayer.trigger(() => {
		broadcastNotification('diagnostics_changed', { uris: uris.map(uri => ({
			uri: uri.toString(),
			diagnostics: vscode.languages.getDiagnostics(uri).map(d => ({
				range: { start: { line: d.range.start.line, character: d.range.start.character },
					end: { line: d.range.end.line, character: d.range.end.character } },
				message: d.message, severity: severityToString(d.severity), source: d.source,
				code: typeof d.code === 'object' ? d.code.value : d.code,
			})),
		})) });
	});

	// lockFile.ts:77-104: the directory made 0700 when missing, the file written in place, 0600
	const dir = lockDirectory();
	await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
	const lockPath = path.join(dir, `${generateUuid()}.lock`);
	const timestamp = Date.now();
	await fsp.writeFile(lockPath, JSON.stringify(lockInfo(socketPath, timestamp), null, 2), { mode: 0o600 });

	let stopping = false;
	const stop = () => {                                                 // contribution.ts:103, IPS:137-151
		if (stopping) { return; }
		stopping = true;
		try { fs.unlinkSync(lockPath); } catch { }
		for (const sessionId in transports) {
			void transports[sessionId].close();
			unregisterTransport(sessionId);
		}
		httpServer.close();
		httpServer.closeAllConnections();
		try { fs.rmSync(path.dirname(socketPath), { recursive: true, force: true }); } catch { }
		process.exit(0);
	};
	process.on('SIGTERM', stop);
	process.on('SIGINT', stop);

	// The versions of the packages loaded (their package.json beside the module resolved;
	// the SDK's exports map hides its own package.json from require.resolve).
	const version = (name) => {
		let dir = path.dirname(require.resolve(name === '@modelcontextprotocol/sdk' ? `${name}/server/mcp.js` : name));
		while (!fs.existsSync(path.join(dir, 'package.json')) || JSON.parse(fs.readFileSync(path.join(dir, 'package.json'))).name !== name) {
			const up = path.dirname(dir);
			if (up === dir) { return null; }
			dir = up;
		}
		return JSON.parse(fs.readFileSync(path.join(dir, 'package.json'))).version;
	};
	const versions = { node: process.versions.node, express: version('express'), '@modelcontextprotocol/sdk': version('@modelcontextprotocol/sdk'), zod: version('zod') };
	process.stdout.write(JSON.stringify({ lock: lockPath, socket: socketPath, pid: process.pid, variant, versions }) + '\n');

	const lines = readline.createInterface({ input: process.stdin });
	lines.on('line', (line) => {
		let command;
		try { command = JSON.parse(line); } catch { return; }
		// (The diff's tab made the active one, as the user's click does: getForCurrentTab.)
		const byTab = (tab) => diffState.getByTabName(tab);
		let found;
		if (command.accept !== undefined) {                              // commands/diffCommands.ts:17-29
			const diff = found = byTab(command.accept);
			if (diff) { diff.cleanup(); diff.resolve({ status: 'SAVED', trigger: 'accepted_via_button' }); }
		} else if (command.reject !== undefined) {                       // commands/diffCommands.ts:33-44
			const diff = found = byTab(command.reject);
			if (diff) { diff.cleanup(); diff.resolve({ status: 'REJECTED', trigger: 'rejected_via_button' }); }
		} else if (command.select !== undefined) {
			vscode.window.activeTextEditor = command.select ? textEditor(command.select) : undefined;
			if (vscode.window.activeTextEditor) { onSelection(vscode.window.activeTextEditor); }
		} else if (command.diagnostics !== undefined) {
			editor.diagnostics = command.diagnostics;
			onDiagnostics((command.changed || []).map(p => Uri.file(p)));
		} else if (command.send_context !== undefined) {
			sendEditorContextToSession(command.send_context);
		} else if (command.folders !== undefined) {                      // contribution.ts:93-96 -> lockFile.ts:43-63
			folders.splice(0, folders.length, ...command.folders.map(f => path.resolve(f)));
			fs.writeFileSync(lockPath, JSON.stringify(lockInfo(socketPath, timestamp), null, 2), { mode: 0o600 });
		}
		const onDiff = command.accept !== undefined || command.reject !== undefined;
		process.stdout.write(JSON.stringify(onDiff ? { done: command, found: !!found } : { done: command }) + '\n');
	});
	lines.on('close', stop);
}

main().catch((err) => { console.error(err && err.stack || String(err)); process.exit(1); });
