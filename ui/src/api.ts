// The one place that calls the Tauri commands (generated in ./bindings). Components and the
// session take an `Api` object, so tests hand them a fake one instead of mocking modules.
// Runs take a plain callback for their events; the Channel plumbing stays in here.

import { Channel } from '@tauri-apps/api/core';
import { open as openDialog, save as saveDialog } from '@tauri-apps/plugin-dialog';
import { commands } from './bindings';
import type {
  Cancelled,
  Decision,
  DecisionAnswer,
  ConnectionReport,
  FileVersions,
  Flow,
  FlowComparison,
  FlowDiff,
  Inbox,
  KindCatalog,
  McpServerTools,
  OpenedFlow,
  ProviderKind,
  Problem,
  RunDetail,
  RunEvent,
  RunRequest,
  Continue,
  RunHistory,
  RunRef,
  RunComparison,
  RunVisits,
  CaseReport,
  CaseSpec,
  SuiteReport,
  TestsRequest,
  TestsView,
  Upcoming,
  Value,
  ServerAction,
  ServerCheck,
  ServerFlows,
  OpenedServerFlow,
  ServerRunRequest,
  SettingsChange,
  SettingsView,
} from './bindings';

export type EventListener = (event: RunEvent) => void;

export interface Api {
  describeKinds(): Promise<KindCatalog>;
  openFlow(path: string): Promise<OpenedFlow>;
  saveFlow(path: string, flow: Flow): Promise<string>;
  recentFiles(): Promise<string[]>;
  /**
   * The system's file dialog to open or save a flow file; the path chosen, or null when the
   * person cancelled (or the system has no such dialog).
   */
  pickFile(mode: 'open' | 'save', current: string): Promise<string | null>;
  /** Calls `listener` with the paths of files dropped onto the window; returns how to stop. */
  onFileDrop(listener: (paths: string[]) => void): Promise<() => void>;
  startupFile(): Promise<string | null>;
  validateFlow(flow: Flow, path: string | null): Promise<Problem[]>;
  /** The next `count` occurrences of each of `flow`'s schedules (none while they do not parse). */
  upcomingSchedules(flow: Flow, count: number): Promise<Upcoming[]>;
  /** Starts a run and answers its id at once; its events follow on `onEvent`. */
  startRun(request: RunRequest, onEvent: EventListener): Promise<string>;
  /**
   * Decides the approval a paused run waits at; its events follow on `onEvent`. At an approval
   * that needs more people, the answer's `approval` says who approved and who is still needed,
   * and the run still waits.
   */
  resumeRun(runId: string, decision: Decision, onEvent: EventListener): Promise<DecisionAnswer>;
  /** Goes on from the breakpoint a paused run stopped at; its events follow on `onEvent`. */
  continueRun(runId: string, how: Continue, onEvent: EventListener): Promise<string>;
  /** Continues an interrupted run; its events follow on `onEvent`. */
  retryRun(runId: string, onEvent: EventListener): Promise<string>;
  /** Cancels a run going here, or one paused for a person (by any process). */
  cancelRun(runId: string): Promise<Cancelled>;
  /** Asks a run going to pause before its next step. */
  pauseRun(runId: string): Promise<boolean>;
  /** The newest runs here and on the team's servers, with what each cost; and the servers that could not answer. */
  listRuns(limit: number): Promise<RunHistory>;
  /** The pinned outputs kept beside the flow file `flowPath`, by node. */
  readPins(flowPath: string): Promise<Record<string, Value>>;
  /** Keeps pinned outputs beside the flow file `flowPath` (none: no file). */
  savePins(flowPath: string, pins: Record<string, Value>): Promise<null>;
  /** Two past runs compared node by node (each of this store or of a server). */
  compareRuns(a: RunRef, b: RunRef): Promise<RunComparison>;
  /** The versions of the flow file `path` kept in the store, newest first. */
  flowVersions(path: string): Promise<FileVersions>;
  /** The open flow against another version: a version's hash, a run's id, a flow file. */
  compareFlow(flow: Flow, path: string | null, against: string): Promise<FlowComparison>;
  /** What changed from flow `a` to flow `b` (a comparison asked again after an edit). */
  diffFlows(a: Flow, b: Flow): Promise<FlowDiff>;
  /** A past run: of this store (`server` null) or of a team's server. */
  openRun(runId: string, server: string | null): Promise<RunDetail>;
  /**
   * Follows a run of a team's server: its events after event `after` go to `onEvent` until it
   * ends or pauses; then the run as the server keeps it (null when following was ended).
   */
  followServerRun(server: string, runId: string, after: number, onEvent: EventListener): Promise<RunDetail | null>;
  /** Goes on from a breakpoint, pauses or cancels a run of a team's server, under its token. */
  actOnServer(server: string, runId: string, action: ServerAction): Promise<null>;
  /** The flows of every team's server, and the servers that could not list theirs. */
  serverFlows(): Promise<ServerFlows>;
  /** A flow of a team's server, as its file is there now. */
  openServerFlow(server: string, name: string): Promise<OpenedServerFlow>;
  /** Runs a flow of a team's server there (with breakpoints and pins); the run's id. */
  runOnServer(server: string, request: ServerRunRequest): Promise<string>;
  /** Ends the following of that run (another run followed since goes on). */
  stopFollowing(server: string, runId: string): Promise<void>;
  /** Every approval waiting for a person, across flows and runs: the inbox. */
  /** This store's approvals waiting, then the team's servers'; and the servers that could not answer. */
  pendingApprovals(): Promise<Inbox>;
  /** Decides an approval of a team's server (Settings → Servers), under its token. */
  decideOnServer(server: string, runId: string, decision: Decision): Promise<DecisionAnswer>;
  /** Every visit of every node of a run (a run going now too), and its cost per node. */
  runVisits(runId: string): Promise<RunVisits>;
  /** The test cases beside the flow file `path`, checked against `flow`. */
  readTests(flow: Flow, path: string): Promise<TestsView>;
  /** Runs a flow's cases (or one); each case's report arrives on `onCase` as it ends. */
  runTests(request: TestsRequest, onCase: (report: CaseReport) => void): Promise<SuiteReport>;
  /** A past run as a new case, for the person to edit. */
  caseFromRun(runId: string): Promise<CaseSpec>;
  /** Adds a case beside the flow file `path` (with `fromRun`'s answers as its recording). */
  saveTestCase(flow: Flow, path: string, spec: CaseSpec, fromRun: string | null): Promise<TestsView>;
  getSettings(): Promise<SettingsView>;
  saveSettings(change: SettingsChange): Promise<SettingsView>;
  testConnection(provider: ProviderKind): Promise<ConnectionReport>;
  /** Checks the connection to a server of Settings → Servers. */
  checkServer(name: string): Promise<ServerCheck>;
  /** The tools of the MCP servers `flow` may use (its own and Settings'; Settings' alone without a flow). */
  listMcpTools(flow: Flow | null, path: string | null): Promise<McpServerTools[]>;
}

function channelTo(onEvent: EventListener): Channel<RunEvent> {
  const channel = new Channel<RunEvent>();
  channel.onmessage = onEvent;
  return channel;
}

declare global {
  interface Window {
    /** The engine's kinds, set by the shell before the page's script runs (`kinds_script`). */
    __WEFT_KINDS__?: KindCatalog;
  }
}

/** The commands of the Tauri shell. */
export const tauriApi: Api = {
  // The shell puts the kinds in the page, so the first frame need not wait for an IPC answer;
  // a page it did not prepare (the dev server reloaded by hand) still asks.
  describeKinds: () => (window.__WEFT_KINDS__ ? Promise.resolve(window.__WEFT_KINDS__) : commands.describeKinds()),
  openFlow: (path) => commands.openFlow(path),
  saveFlow: (path, flow) => commands.saveFlow(path, flow),
  recentFiles: () => commands.recentFiles(),
  pickFile: async (mode, current) => {
    const filters = [{ name: 'Weft flows', extensions: ['json'] }];
    const chosen =
      mode === 'open'
        ? await openDialog({ title: 'Open a flow', filters, multiple: false, directory: false })
        : await saveDialog({ title: 'Save the flow as', filters, defaultPath: current || undefined });
    return typeof chosen === 'string' ? chosen : null;
  },
  onFileDrop: async (listener) => {
    // The shell sends the drops (src-tauri `watch_file_drops`): listening to Tauri's drag-and-drop
    // events here instead would cost the app's own process memory from the start.
    let watching = true;
    const drops = new Channel<string[]>();
    drops.onmessage = (paths) => {
      if (watching) listener(paths);
    };
    await commands.watchFileDrops(drops);
    return () => {
      watching = false;
    };
  },
  startupFile: () => commands.startupFile(),
  validateFlow: (flow, path) => commands.validateFlow(flow, path),
  upcomingSchedules: (flow, count) => commands.upcomingSchedules(flow, count),
  startRun: (request, onEvent) => commands.startRun(request, channelTo(onEvent)),
  resumeRun: (runId, decision, onEvent) => commands.resumeRun(runId, decision, channelTo(onEvent)),
  continueRun: (runId, how, onEvent) => commands.continueRun(runId, how, channelTo(onEvent)),
  retryRun: (runId, onEvent) => commands.retryRun(runId, channelTo(onEvent)),
  cancelRun: (runId) => commands.cancelRun(runId),
  pauseRun: (runId) => commands.pauseRun(runId),
  listRuns: (limit) => commands.listRuns(limit),
  compareRuns: (a, b) => commands.compareRuns(a, b),
  flowVersions: (path) => commands.flowVersions(path),
  compareFlow: (flow, path, against) => commands.compareFlow(flow, path, against),
  diffFlows: (a, b) => commands.flowDiff(a, b),
  readPins: (flowPath) => commands.readPins(flowPath),
  savePins: (flowPath, pins) => commands.savePins(flowPath, pins),
  openRun: (runId, server) => commands.openRun(runId, server),
  followServerRun: (server, runId, after, onEvent) => commands.followServerRun(server, runId, after, channelTo(onEvent)),
  stopFollowing: (server, runId) => commands.stopFollowing(server, runId),
  actOnServer: (server, runId, action) => commands.actOnServer(server, runId, action),
  serverFlows: () => commands.serverFlows(),
  openServerFlow: (server, name) => commands.openServerFlow(server, name),
  runOnServer: (server, request) => commands.runOnServer(server, request),
  runVisits: (runId) => commands.runVisits(runId),
  pendingApprovals: () => commands.pendingApprovals(),
  decideOnServer: (server, runId, decision) => commands.decideOnServer(server, runId, decision),
  readTests: (flow, path) => commands.readTests(flow, path),
  runTests: (request, onCase) => {
    const channel = new Channel<CaseReport>();
    channel.onmessage = onCase;
    return commands.runTests(request, channel);
  },
  caseFromRun: (runId) => commands.caseFromRun(runId),
  saveTestCase: (flow, path, spec, fromRun) => commands.saveTestCase(flow, path, spec, fromRun),
  getSettings: () => commands.getSettings(),
  saveSettings: (change) => commands.saveSettings(change),
  testConnection: (provider) => commands.testConnection(provider),
  checkServer: (name) => commands.checkServer(name),
  listMcpTools: (flow, path) => commands.listMcpTools(flow, path),
};
