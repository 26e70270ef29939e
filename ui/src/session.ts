// The app's state around the commands: the kind catalog, validation as you edit, runs and
// their events, past runs, and the errors commands report. It owns the canvas store (the
// edited flow) and the run store (the run shown), and talks to the backend only through the
// `Api` it is given.

import type { Api } from './api';
import { errorMessage } from './errors';
import type {
  Breakpoint,
  BreakWhen,
  Continue,
  Cost,
  FileVersions,
  KindCatalog,
  McpServerTools,
  Problem,
  RunComparison,
  RunDetail,
  RunListing,
  RunRef,
  RunVisits,
  ServerAction,
  ServerFlows,
  OpenedServerFlow,
  PendingApproval,
  CaseReport,
  CaseSpec,
  Decision,
  DecisionAnswer,
  TestsView,
  Upcoming,
  Value,
} from './bindings';
import { canvasFlow, type CanvasFlow } from './flowMapping';
import { defaultData, kindOf, kindRuns } from './catalog';
import { CanvasStore, emptyFlow } from './canvasStore';
import { RunStore, emptyRunView, runViewFromDetail, type RunView } from './runStore';
import { earliestStale, staleNodes } from './stale';
import { LayoutStore } from './layout';
import { flowCompareView, type FlowCompareView } from './flowCompare';
import { markStartup } from './startup';

export interface Banner {
  id: number;
  message: string;
  /** Said for the person's information (a decision counted), not an error. */
  notice?: boolean;
}

/** A test case being written from a past run: its JSON, and where it will go. */
export interface TestDraft {
  text: string;
  /** The run it was made from (its LLM answers become the case's recording). */
  fromRun: string;
  /** The flow file the run ran, beside which the case is saved. */
  flowPath: string;
  problem: string | null;
  /** Where it was saved, once it was. */
  savedTo: string | null;
}

/** A stored run as shown: its flow with its lists filled in. */
/** A person's answer at an approval, as every host of Weft takes it. */
export function decisionOf(approve: boolean, note: string, fields: Record<string, Value>): Decision {
  return { decision: approve ? 'approve' : 'reject', note, fields };
}

/** A past run shown on the canvas; `server` names the team's server it is of (null: this store). */
export type ViewedRun = RunDetail & { flow: CanvasFlow; server: string | null };

/** Where the edited flow came from when it is a flow of a team's server: runs of it go there. */
export type ServerFlowOrigin = Omit<OpenedServerFlow, 'flow'>;

/** A run as History lists it: of this store, or (`server`) of a team's server. */
export type HistoryEntry = Omit<RunListing, 'cost'>;

/** How History, Compare and the costs know a run: its id, with its server's name for a server's. */
export function runKey(run: RunRef): string {
  return run.server ? `${run.server}/${run.id}` : run.id;
}

export interface SessionState {
  catalog: KindCatalog | null;
  problems: Problem[];
  /** Problems by the node they name (the same array object until problems change). */
  problemsByNode: Record<string, Problem[]>;
  problemEdges: ReadonlySet<string>;
  /** The next occurrences of the edited flow's schedules (`settings.schedules`), as validated. */
  upcoming: Upcoming[];
  errors: Banner[];
  /** Recent runs from the store and the team's servers, newest first. */
  history: HistoryEntry[];
  /** What each run in `history` cost, by its `runKey`. */
  historyCosts: Record<string, Cost>;
  /** The team's servers that could not list their runs, each saying why. */
  historyProblems: string[];
  /** The flows of the team's servers, as last listed (`null` until asked). */
  serverFlows: ServerFlows | null;
  /** The edited flow is a team server's flow (opened from it, not saved here since): runs go there. */
  serverFlow: ServerFlowOrigin | null;
  /** Two past runs compared, shown over the canvas. */
  comparison: RunComparison | null;
  /** The open flow compared with another version of it, marked on the canvas. */
  flowCompare: FlowCompareView | null;
  /** The open file's versions kept in the store (`null` until read, or for an unsaved flow). */
  versions: FileVersions | null;
  /**
   * Breakpoints by flow file (`''` for a flow not saved yet), then by node: debugging state,
   * never written into the flow.
   */
  breakpoints: Record<string, Record<string, Breakpoint>>;
  /**
   * Pinned outputs by flow file (`''` for a flow not saved yet), then by node: kept beside the
   * file (`NAME.pins.json`), never in it.
   */
  pins: Record<string, Record<string, Value>>;
  /** The edited flow as its last run (the one shown) started: what stale marks compare with. */
  ranFlow: CanvasFlow | null;
  /** A past run shown on the canvas instead of the edited flow. */
  viewing: ViewedRun | null;
  /** The node selected while a past run is shown (the edited flow's selection is kept). */
  viewSelection: string | null;
  /**
   * Every visit of every node of the run shown (live or past), with the run's cost per node;
   * `null` until the store has answered. Refreshed as a live run's steps end.
   */
  visits: RunVisits | null;
  /** The test cases beside the edited flow's file (`null` until read, or for an unsaved flow). */
  tests: TestsView | null;
  /** Each case's latest report, by name; `running` while it runs. */
  testResults: Record<string, CaseReport | 'running'>;
  /** Cases are running. */
  testsRunning: boolean;
  /** A case written from the past run shown, being edited before it is saved. */
  testDraft: TestDraft | null;
  /**
   * Every approval waiting for a person across flows and runs (this app's, `weft`'s, a
   * server's), oldest first; read again as runs pause and end, and every few seconds.
   */
  inbox: PendingApproval[];
  /** The team's servers that could not list their approvals, each saying why. */
  inboxProblems: string[];
  /**
   * Model names the configured providers list (`provider/model`), offered by the model field;
   * `null` until asked.
   */
  models: string[] | null;
  /**
   * The tools of the MCP servers the edited flow may use, as last listed (Test connection, or
   * the tool picker when first opened); `null` until asked.
   */
  mcpTools: McpServerTools[] | null;
  /** Listing them is going. */
  mcpToolsLoading: boolean;
  /** Why they could not be listed at all (the flow's servers are not valid). */
  mcpToolsProblem: string | null;
  /** A run or resume command is going. */
  busy: boolean;
  pausedBannerDismissed: boolean;
}

/** How long edits rest before the flow is validated. */
export const VALIDATE_DELAY_MS = 250;
/** How many past runs the History tab lists. */
export const HISTORY_LIMIT = 50;
/** How long a live run's visits rest before they are read again (steps can end by hundreds). */
export const VISITS_DELAY_MS = 200;

/** Events after which a run's visits or costs have changed. */
const CHANGES_VISITS: ReadonlySet<string> = new Set([
  'step_start',
  'step_end',
  'error',
  'llm_response',
  'wait_input',
  'run_end',
]);

const NO_EDGES: ReadonlySet<string> = new Set();
const NO_UPCOMING: Upcoming[] = [];
/** How many occurrences of each schedule the start node knows (the next, and a few in its tooltip). */
export const UPCOMING_COUNT = 3;

export class Session {
  readonly canvas: CanvasStore;
  readonly run: RunStore;
  /** How the window is divided (remembered between starts). */
  readonly layout: LayoutStore;
  private state: SessionState = {
    catalog: null,
    problems: [],
    problemsByNode: {},
    problemEdges: NO_EDGES,
    upcoming: NO_UPCOMING,
    errors: [],
    history: [],
    historyCosts: {},
    historyProblems: [],
    serverFlows: null,
    serverFlow: null,
    comparison: null,
    flowCompare: null,
    versions: null,
    breakpoints: {},
    pins: {},
    ranFlow: null,
    viewing: null,
    viewSelection: null,
    visits: null,
    tests: null,
    testResults: {},
    testsRunning: false,
    testDraft: null,
    inbox: [],
    inboxProblems: [],
    models: null,
    mcpTools: null,
    mcpToolsLoading: false,
    mcpToolsProblem: null,
    busy: false,
    pausedBannerDismissed: false,
  };
  private listeners = new Set<() => void>();
  private validateTimer: ReturnType<typeof setTimeout> | null = null;
  private validation = 0;
  private upcomingAsked = 0;
  private nextBannerId = 1;
  /** The live run's view, kept while a past run is shown. */
  private liveView: RunView | null = null;
  /** The live run's visits, kept while a past run is shown. */
  private liveVisits: RunVisits | null = null;
  private visitsTimer: ReturnType<typeof setTimeout> | null = null;
  private cancelRequested = false;
  /**
   * Which run the canvas follows: each start or resume takes the next number, and opening or
   * creating another flow moves on too. A run whose number is no longer current goes on in
   * the engine (it is stored, and History shows it) but no longer paints this canvas.
   */
  private following = 0;

  constructor(
    readonly api: Api,
    options: { canvas?: CanvasStore; run?: RunStore; layout?: LayoutStore } = {},
  ) {
    this.canvas = options.canvas ?? new CanvasStore();
    this.run = options.run ?? new RunStore();
    this.layout = options.layout ?? new LayoutStore();
    let flow = this.canvas.getSnapshot().flow;
    this.canvas.subscribe(() => {
      const next = this.canvas.getSnapshot().flow;
      if (next !== flow) {
        flow = next;
        this.validateSoon();
      }
    });
  }

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  getSnapshot = (): SessionState => this.state;

  /** Loads the catalog and the history, and validates the flow. `onCatalog` is called once the
   *  catalog is in, or has failed (its error then reported), before anything else is asked. */
  async init(onCatalog?: () => void): Promise<void> {
    const catalogIn = await this.loadCatalog();
    onCatalog?.();
    if (catalogIn) {
      try {
        const startup = await this.api.startupFile();
        if (startup !== null) await this.open(startup);
      } catch (error) {
        this.reportError(error);
      }
    }
    await Promise.all([this.validateNow(), this.refreshHistory(), this.refreshInbox()]);
  }

  /** Asks the engine for its kinds; false when it could not answer (the error reported). */
  private async loadCatalog(): Promise<boolean> {
    try {
      const catalog = await this.api.describeKinds();
      markStartup('kinds');
      this.set({ catalog });
    } catch (error) {
      this.reportError(error);
      return false;
    }
    const { flow, dirty, path } = this.canvas.getSnapshot();
    if (!dirty && path === null && flow.nodes.length === 1) {
      // The empty flow made before the catalog was known gets the start kind's defaults.
      this.canvas.load(this.newFlow(), null);
    }
    return true;
  }

  // --- errors ---------------------------------------------------------------------------

  reportError(error: unknown): void {
    const banner = { id: this.nextBannerId++, message: errorMessage(error) };
    this.set({ errors: [...this.state.errors, banner] });
  }

  /** Tells the person something that went as it should but not as they may expect. */
  reportNotice(message: string): void {
    const banner = { id: this.nextBannerId++, message, notice: true };
    this.set({ errors: [...this.state.errors, banner] });
  }

  dismissError(id: number): void {
    this.set({ errors: this.state.errors.filter((banner) => banner.id !== id) });
  }

  // --- files ----------------------------------------------------------------------------

  /** A flow with one start node, with the start kind's defaults. */
  newFlow(): CanvasFlow {
    const catalog = this.state.catalog;
    const start = kindOf(catalog, 'start');
    return emptyFlow(catalog && start ? defaultData(start) : {});
  }

  createNew(): void {
    this.leaveViewing();
    this.detachRun();
    this.set({ ranFlow: null, flowCompare: null, versions: null, serverFlow: null });
    this.canvas.load(this.newFlow(), null);
    this.run.show(emptyRunView());
    this.set({ visits: null });
    void this.validateNow();
  }

  async open(path: string): Promise<boolean> {
    try {
      const opened = await this.api.openFlow(path);
      this.leaveViewing();
      this.detachRun();
      this.canvas.load(opened.flow, opened.path);
      this.set({ ranFlow: null, visits: null, tests: null, testResults: {}, flowCompare: null, versions: null, serverFlow: null });
      this.run.show(emptyRunView());
      void this.validateNow();
      void this.loadPins(opened.path);
      return true;
    } catch (error) {
      this.reportError(error);
      return false;
    }
  }

  /** Lists the flows of every team's server (Settings → Servers). */
  async loadServerFlows(): Promise<void> {
    try {
      this.set({ serverFlows: await this.api.serverFlows() });
    } catch (error) {
      this.reportError(error);
    }
  }

  /**
   * Opens the flow `name` of the team's server `server` on the canvas, as its file is there
   * now: Run runs it on the server (with the breakpoints and pins set here), and the run is
   * followed live.
   */
  async openServerFlow(server: string, name: string): Promise<boolean> {
    try {
      const opened = await this.api.openServerFlow(server, name);
      this.leaveViewing();
      this.detachRun();
      this.canvas.load(opened.flow, null);
      this.set({
        ranFlow: null,
        visits: null,
        tests: null,
        testResults: {},
        flowCompare: null,
        versions: null,
        serverFlow: { server, name: opened.name, version: opened.version },
        pins: { ...this.state.pins, '': {} },
        breakpoints: { ...this.state.breakpoints, '': {} },
      });
      this.run.show(emptyRunView());
      void this.validateNow();
      return true;
    } catch (error) {
      this.reportError(error);
      return false;
    }
  }

  /** Saves to `path` (or the flow's own file). Returns whether it was written. */
  async save(path: string | null = this.canvas.getSnapshot().path): Promise<boolean> {
    if (!path) return false;
    const { flow, path: before } = this.canvas.getSnapshot();
    try {
      const written = await this.api.saveFlow(path, flow);
      this.canvas.markSaved(written, flow);
      // Saved here, a server's flow becomes a file of this machine: it runs here from now on.
      if (this.state.serverFlow) this.set({ serverFlow: null });
      // Subflow paths resolve against the file's folder: a new place may change problems.
      if (written !== before) void this.validateNow();
      // The save is a version of its own (History → Versions).
      if (this.state.versions) void this.refreshVersions();
      return true;
    } catch (error) {
      this.reportError(error);
      return false;
    }
  }

  /** The system's file dialog (Open, Save As): the path chosen, or null. */
  async pickFile(mode: 'open' | 'save', current: string): Promise<string | null> {
    try {
      return await this.api.pickFile(mode, current);
    } catch (error) {
      this.reportError(error);
      return null;
    }
  }

  async recentFiles(): Promise<string[]> {
    try {
      return await this.api.recentFiles();
    } catch (error) {
      this.reportError(error);
      return [];
    }
  }

  // --- validation -----------------------------------------------------------------------

  validateSoon(): void {
    if (this.validateTimer !== null) clearTimeout(this.validateTimer);
    this.validateTimer = setTimeout(() => {
      this.validateTimer = null;
      void this.validateNow();
    }, VALIDATE_DELAY_MS);
  }

  async validateNow(): Promise<void> {
    if (this.validateTimer !== null) {
      clearTimeout(this.validateTimer);
      this.validateTimer = null;
    }
    const ticket = ++this.validation;
    const { flow, path } = this.canvas.getSnapshot();
    void this.refreshUpcoming();
    if (this.state.flowCompare) void this.recompare();
    try {
      const problems = await this.api.validateFlow(flow, path);
      // An answer for an older version of the flow is dropped.
      if (ticket === this.validation) this.setProblems(problems);
    } catch (error) {
      if (ticket === this.validation) this.reportError(error);
    }
  }

  /** Asks again when the edited flow's schedules come next (after an edit, and as time passes). */
  async refreshUpcoming(): Promise<void> {
    const ticket = ++this.upcomingAsked;
    const { flow } = this.canvas.getSnapshot();
    if (flow.settings?.schedules === undefined) {
      if (this.state.upcoming.length > 0) this.set({ upcoming: NO_UPCOMING });
      return;
    }
    try {
      const upcoming = await this.api.upcomingSchedules(flow, UPCOMING_COUNT);
      if (ticket === this.upcomingAsked) this.set({ upcoming });
    } catch (error) {
      if (ticket === this.upcomingAsked) this.reportError(error);
    }
  }

  private setProblems(problems: Problem[]): void {
    const problemsByNode: Record<string, Problem[]> = {};
    const problemEdges = new Set<string>();
    for (const problem of problems) {
      if (problem.nodeId) (problemsByNode[problem.nodeId] ??= []).push(problem);
      if (problem.edgeId) problemEdges.add(problem.edgeId);
    }
    this.set({ problems, problemsByNode, problemEdges });
  }

  /** Why Run is refused right now, or null when it is not. */
  runBlockedReason(): string | null {
    if (this.state.viewing) return 'A past run is shown: go back to editing to run the flow.';
    if (this.state.busy || this.run.getSnapshot().status === 'running') return 'A run is going.';
    if (!this.state.catalog) return 'The node kinds are not loaded.';
    const origin = this.state.serverFlow;
    if (origin && this.canvas.getSnapshot().dirty) {
      return `Edited since it was opened from server ${origin.server}, which runs its own file: Save as… to run your edits here.`;
    }
    const errors = this.state.problems.filter((problem) => problem.severity === 'error');
    if (errors.length === 0) return null;
    const first = errors[0];
    const where = first.nodeId ? `node ${first.nodeId}: ` : first.edgeId ? `edge ${first.edgeId}: ` : '';
    return `${errors.length} ${errors.length === 1 ? 'problem' : 'problems'}: ${where}${first.message}`;
  }

  // --- runs -----------------------------------------------------------------------------

  private runnableNodeIds(flow: CanvasFlow): string[] {
    const catalog = this.state.catalog;
    return flow.nodes.filter((node) => kindRuns(kindOf(catalog, node.type))).map((node) => node.id);
  }

  /**
   * Why "run from here" / "run this node" is refused right now, or null. A partial run uses
   * the outputs of the run shown on the canvas, so there must be one of the edited flow.
   */
  partialRunBlockedReason(): string | null {
    const blocked = this.runBlockedReason();
    if (blocked !== null) return blocked;
    if (this.state.viewing) return 'Go back to editing first.';
    if (this.state.serverFlow) return `A flow of server ${this.state.serverFlow.server} runs there whole.`;
    const { runId, status } = this.run.getSnapshot();
    if (!runId || status === null) return 'Run the flow once first: a partial run reuses its outputs.';
    if (status === 'running' || status === 'paused') return 'Wait until the run shown ends.';
    return null;
  }

  /**
   * Runs the edited flow with `input` (empty: the start node's initial input). With `from`,
   * runs only from that node on (or, with `only`, just that node), feeding it what the run
   * shown now left. The command answers with the run's id at once; the run's events then
   * paint the canvas until it ends or pauses.
   */
  async startRun(
    input: string,
    from: { nodeId: string; only: boolean } | null = null,
    replay: string | null = null,
  ): Promise<void> {
    if (this.runBlockedReason() !== null) return;
    if (from && this.partialRunBlockedReason() !== null) return;
    const origin = this.state.serverFlow;
    if (origin && !replay) {
      await this.runOnServer(origin, input);
      return;
    }
    const earlierRunId = this.run.getSnapshot().runId;
    this.leaveViewing();
    const { flow, path } = this.canvas.getSnapshot();
    this.set({ ranFlow: flow });
    this.cancelRequested = false;
    const context = { edges: flow.edges, runnableNodeIds: this.runnableNodeIds(flow) };
    if (from) this.run.beginFrom(context);
    else this.run.begin(context);
    this.showLog();
    const run = ++this.following;
    this.set({ busy: true, visits: null });
    try {
      const runId = await this.api.startRun(
        {
          flow,
          path,
          input: input.trim() === '' ? null : input,
          from: from && earlierRunId ? { runId: earlierRunId, nodeId: from.nodeId, only: from.only } : null,
          replay,
          pins: this.pinsOfFlow(),
          breakpoints: Object.values(this.breakpointsOfFlow()).map((breakpoint) => ({
            ...breakpoint,
            condition: breakpoint.condition?.trim() || null,
          })),
        },
        (event) => this.onEvent(run, event),
      );
      if (run === this.following) this.run.named(runId);
    } catch (error) {
      if (run === this.following) this.run.fail(errorMessage(error));
      this.reportError(error);
    } finally {
      this.set({ busy: false });
      void this.refreshHistory();
    }
  }

  /**
   * Runs the server's flow the edited one was opened from, on that server, with the
   * breakpoints and pins set here; the run is then shown and followed live as it goes there.
   */
  private async runOnServer(origin: ServerFlowOrigin, input: string): Promise<void> {
    this.set({ busy: true });
    let runId: string;
    try {
      runId = await this.api.runOnServer(origin.server, {
        flow: origin.name,
        input: input.trim() === '' ? null : input,
        pins: this.pinsOfFlow(),
        breakpoints: Object.values(this.breakpointsOfFlow()).map((breakpoint) => ({
          ...breakpoint,
          condition: breakpoint.condition?.trim() || null,
        })),
      });
    } catch (error) {
      this.reportError(error);
      return;
    } finally {
      this.set({ busy: false });
    }
    await this.openRun(runId, origin.server);
    void this.refreshHistory();
  }

  /**
   * "Run now" on a schedule: runs the edited flow at once with the input the schedule gives
   * (the start node's initial input when it gives none), as a person's run.
   */
  async runSchedule(index: number): Promise<void> {
    const schedule = this.state.upcoming.find((upcoming) => upcoming.schedule === index);
    await this.startRun(schedule?.input ?? '');
  }

  /** The log takes room once there is something in it to follow (it is collapsed until then). */
  private showLog(): void {
    if (this.layout.getSnapshot().logCollapsed) this.layout.set({ logCollapsed: false });
  }

  /** Stops following the run shown: it goes on in the engine, but no longer paints the canvas. */
  private detachRun(): void {
    this.following++;
    this.cancelRequested = false;
  }

  private onEvent(run: number, event: Parameters<RunStore['push']>[0]): void {
    const ends = event.type === 'run_end' || (event.type === 'wait_input' && !event.scope);
    if (run !== this.following) {
      // A detached run: History shows how it ended.
      if (ends) {
        void this.refreshHistory();
        void this.refreshInbox();
      }
      return;
    }
    this.run.push(event);
    if (CHANGES_VISITS.has(event.type)) this.refreshVisitsSoon();
    if (this.cancelRequested && event.type === 'run_start' && !event.scope) {
      // Cancel was pressed before the run had an id.
      void this.api.cancelRun(event.runId).catch((error) => this.reportError(error));
    }
    if (ends) {
      void this.refreshHistory();
      void this.refreshInbox();
    }
  }

  async cancelRun(): Promise<void> {
    const { runId, status } = this.run.getSnapshot();
    if (status !== 'running') return;
    if (this.state.viewing?.server) {
      await this.actOnViewedServerRun('cancel');
      return;
    }
    if (!runId) {
      this.cancelRequested = true;
      return;
    }
    try {
      await this.api.cancelRun(runId);
    } catch (error) {
      this.reportError(error);
    }
  }

  /**
   * Asks the run shown to pause: it starts no new step, and once the steps running have ended
   * it stops before the next one, where Continue and Step go on.
   */
  async pauseRun(): Promise<void> {
    const { runId, status } = this.run.getSnapshot();
    if (status !== 'running' || !runId) return;
    if (this.state.viewing?.server) {
      await this.actOnViewedServerRun('pause');
      return;
    }
    try {
      await this.api.pauseRun(runId);
    } catch (error) {
      this.reportError(error);
    }
  }

  /**
   * Answers the approval the shown run waits for, with the form's answers; its events continue
   * in the same view.
   */
  async answerApproval(approve: boolean, note: string, fields: Record<string, Value> = {}): Promise<void> {
    const viewing = this.state.viewing;
    if (viewing?.server) {
      await this.decideFromInbox(viewing.run.summary.id, approve, note, fields, viewing.server);
      return;
    }
    await this.goOnFromPause((runId, onEvent) => this.api.resumeRun(runId, decisionOf(approve, note, fields), onEvent));
    void this.refreshInbox();
  }

  /**
   * A decision kept at an approval that needs more people: the run still waits, and a banner
   * says who approved and who is still needed.
   */
  private counted(answer: DecisionAnswer): boolean {
    const progress = answer.approval;
    if (!progress) return false;
    const from = progress.mayStillApprove.length > 0 ? `, from ${progress.mayStillApprove.join(', ')}` : '';
    this.reportNotice(
      `Your approval is kept: ${progress.approvedBy.length} of ${progress.required} (approved by ${progress.approvedBy.join(', ')}); still needed: ${progress.stillNeeded} more${from}.`,
    );
    return true;
  }

  // --- models ---------------------------------------------------------------------------

  /**
   * Asks each provider with settings for its models (what Settings → Test connection lists) and
   * keeps their names for the model field; a provider that cannot be reached adds none.
   */
  async loadModels(): Promise<void> {
    this.set({ models: this.state.models ?? [] });
    const providers = ['openai', 'anthropic', 'ollama'] as const;
    const reports = await Promise.allSettled(providers.map((provider) => this.api.testConnection(provider)));
    const names = new Set<string>();
    reports.forEach((report, index) => {
      if (report.status !== 'fulfilled') return;
      const provider = providers[index];
      for (const model of report.value.models) names.add(provider === 'openai' ? model : `${provider}/${model}`);
    });
    this.set({ models: [...names].sort() });
  }

  // --- MCP tools ------------------------------------------------------------------------

  /**
   * Connects to the MCP servers the edited flow may use and keeps their tools, for the flow
   * panel's list and the agents' tool picker. A server that cannot be listed says why in its
   * entry; servers that are not valid at all leave the problem.
   */
  async loadMcpTools(): Promise<void> {
    const { flow, path } = this.canvas.getSnapshot();
    this.set({ mcpToolsLoading: true });
    try {
      this.set({ mcpTools: await this.api.listMcpTools(flow, path), mcpToolsProblem: null, mcpToolsLoading: false });
    } catch (error) {
      this.set({ mcpTools: null, mcpToolsProblem: errorMessage(error), mcpToolsLoading: false });
    }
  }

  // --- the inbox ------------------------------------------------------------------------

  /** Reads every approval waiting for a person, across flows and runs. */
  async refreshInbox(): Promise<void> {
    try {
      const inbox = await this.api.pendingApprovals();
      this.set({ inbox: inbox.approvals, inboxProblems: inbox.problems });
    } catch (error) {
      this.reportError(error);
    }
  }

  /** What the run `runId` waits for, as the inbox has it (with its form), if it waits. */
  pendingOf(runId: string | null): PendingApproval | null {
    if (!runId) return null;
    return this.state.inbox.find((approval) => approval.runId === runId) ?? null;
  }

  /**
   * Decides an approval from the inbox. The run shown on the canvas goes on there; any other
   * run (another flow's, one paused by `weft` or a server) goes on in the background, and the
   * inbox and History show where it got to.
   */
  async decideFromInbox(
    runId: string,
    approve: boolean,
    note: string,
    fields: Record<string, Value> = {},
    onServer: string | null = null,
  ): Promise<void> {
    const shown = this.run.getSnapshot();
    const server = onServer ?? this.state.inbox.find((approval) => approval.runId === runId)?.server ?? null;
    if (server === null && !this.state.viewing && shown.runId === runId && shown.status === 'paused') {
      await this.answerApproval(approve, note, fields);
      return;
    }
    try {
      const decision = decisionOf(approve, note, fields);
      // A team server's run is decided there, under its token.
      const counted = this.counted(
        server !== null ? await this.api.decideOnServer(server, runId, decision) : await this.api.resumeRun(runId, decision, () => {}),
      );
      // The server's run shown goes on there: it is shown as it goes.
      if (server !== null && !counted && this.isViewed(server, runId)) await this.openRun(runId, server);
    } catch (error) {
      this.reportError(error);
    } finally {
      await this.refreshInbox();
      void this.refreshHistory();
    }
  }

  /**
   * Goes on from the pause the shown run is at with `answer` (a decision, a continue); its
   * events continue in the same view. A refused answer loses nothing: the run shows paused again.
   */
  private async goOnFromPause(
    answer: (runId: string, onEvent: (event: Parameters<RunStore['push']>[0]) => void) => Promise<string | DecisionAnswer>,
  ): Promise<void> {
    const before = this.run.getSnapshot();
    if (before.status !== 'paused' || !before.runId || this.state.busy) return;
    this.run.resume();
    const run = ++this.following;
    this.set({ busy: true });
    try {
      const answered = await answer(before.runId, (event) => this.onEvent(run, event));
      // Counted, not settled: the run still waits where it was.
      if (typeof answered !== 'string' && this.counted(answered) && run === this.following) this.run.show(before);
    } catch (error) {
      if (run === this.following) {
        if (this.run.getSnapshot().events.length === before.events.length) this.run.show(before);
        else this.run.fail(errorMessage(error));
      }
      this.reportError(error);
    } finally {
      this.set({ busy: false });
    }
  }

  /**
   * Continues the interrupted run shown (its process stopped before it ended): the steps that
   * were going run again, and its events append to the same view.
   */
  async continueRun(): Promise<void> {
    const before = this.run.getSnapshot();
    if (before.status !== 'interrupted' || !before.runId || this.state.busy) return;
    this.run.resume();
    const run = ++this.following;
    this.set({ busy: true });
    try {
      await this.api.retryRun(before.runId, (event) => this.onEvent(run, event));
    } catch (error) {
      if (run === this.following) this.run.show(before);
      this.reportError(error);
    } finally {
      this.set({ busy: false });
    }
  }

  // --- visits and cost -----------------------------------------------------------------

  /** Reads the visits of the run shown again, once events have rested a moment. */
  private refreshVisitsSoon(): void {
    if (this.visitsTimer !== null) return;
    this.visitsTimer = setTimeout(() => {
      this.visitsTimer = null;
      void this.refreshVisits();
    }, VISITS_DELAY_MS);
  }

  /** Reads every visit of the run shown, and its cost per node, from the store. */
  async refreshVisits(): Promise<void> {
    const viewing = this.state.viewing;
    if (viewing?.server) {
      // A server's run: its visits came with it (and come again as following it ends).
      this.set({ visits: { visits: viewing.visits, cost: viewing.cost } });
      return;
    }
    const runId = viewing?.run.summary.id ?? this.run.getSnapshot().runId;
    if (!runId) return;
    try {
      const visits = await this.api.runVisits(runId);
      // The answer is dropped when another run is shown meanwhile.
      const shown = this.state.viewing?.run.summary.id ?? this.run.getSnapshot().runId;
      if (shown === runId) this.set({ visits });
    } catch (error) {
      this.reportError(error);
    }
  }

  // --- flow tests -----------------------------------------------------------------------

  /** Reads the test cases beside the edited flow's file (none for a flow not saved yet). */
  async loadTests(): Promise<void> {
    const { flow, path } = this.canvas.getSnapshot();
    if (!path) {
      this.set({ tests: null });
      return;
    }
    try {
      const tests = await this.api.readTests(flow, path);
      if (this.canvas.getSnapshot().path === path) this.set({ tests });
    } catch (error) {
      this.reportError(error);
    }
  }

  /**
   * Runs the edited flow's cases (or the one named) as stored runs; each case's report shows as
   * it ends. With `record`, the providers are asked and their answers kept for offline runs.
   */
  async runTests(caseName: string | null = null, record = false): Promise<void> {
    const { flow, path } = this.canvas.getSnapshot();
    const tests = this.state.tests;
    if (!path || !tests || this.state.testsRunning) return;
    const names = caseName ? [caseName] : tests.cases.map((testCase) => testCase.name);
    const running: Record<string, CaseReport | 'running'> = { ...this.state.testResults };
    for (const name of names) running[name] = 'running';
    this.set({ testResults: running, testsRunning: true });
    try {
      await this.api.runTests({ flow, path, case: caseName, record }, (report) =>
        this.set({ testResults: { ...this.state.testResults, [report.name]: report } }),
      );
    } catch (error) {
      const results = { ...this.state.testResults };
      for (const name of names) if (results[name] === 'running') delete results[name];
      this.set({ testResults: results });
      this.reportError(error);
    } finally {
      this.set({ testsRunning: false });
      void this.refreshHistory();
      void this.loadTests();
    }
  }

  /** Why the past run shown cannot become a test case now, or null. */
  caseFromViewedBlockedReason(): string | null {
    const viewed = this.state.viewing;
    if (!viewed) return 'Open a past run first.';
    if (viewed.server) return `A run of server ${viewed.server}: its recorded answers are kept there.`;
    if (!viewed.run.summary.flowPath) return "This run's flow was not saved to a file: a case lives beside its flow's file.";
    return null;
  }

  /** Starts a test case from the past run shown: its input, decisions and outputs as expectations. */
  async draftCaseFromViewed(): Promise<void> {
    const viewed = this.state.viewing;
    if (this.caseFromViewedBlockedReason() !== null || !viewed?.run.summary.flowPath) return;
    try {
      const spec = await this.api.caseFromRun(viewed.run.summary.id);
      this.set({
        testDraft: {
          text: JSON.stringify(spec, null, 2),
          fromRun: viewed.run.summary.id,
          flowPath: viewed.run.summary.flowPath,
          problem: null,
          savedTo: null,
        },
      });
    } catch (error) {
      this.reportError(error);
    }
  }

  editTestDraft(text: string): void {
    if (this.state.testDraft) this.set({ testDraft: { ...this.state.testDraft, text, problem: null } });
  }

  closeTestDraft(): void {
    this.set({ testDraft: null });
  }

  /**
   * Saves the case being written beside its flow's file, with the run's LLM answers as its
   * recording; a case that is not JSON, or does not fit the flow, is refused and stays open.
   */
  async saveTestDraft(): Promise<void> {
    const draft = this.state.testDraft;
    const viewed = this.state.viewing;
    if (!draft) return;
    let spec: CaseSpec;
    try {
      spec = JSON.parse(draft.text) as CaseSpec;
    } catch (error) {
      this.set({ testDraft: { ...draft, problem: `Not JSON: ${(error as Error).message}` } });
      return;
    }
    // The case is checked against the flow as it ran (the file may have changed since).
    const flow = viewed && viewed.run.summary.id === draft.fromRun ? viewed.flow : this.canvas.getSnapshot().flow;
    try {
      const tests = await this.api.saveTestCase(flow, draft.flowPath, spec, draft.fromRun);
      this.set({ testDraft: { ...draft, problem: null, savedTo: tests.testsFile } });
      if (this.canvas.getSnapshot().path === draft.flowPath) this.set({ tests });
    } catch (error) {
      this.set({ testDraft: { ...draft, problem: errorMessage(error) } });
    }
  }

  // --- stale marks ----------------------------------------------------------------------

  /** The edited flow's nodes its last run no longer stands for (edited since, or after one). */
  staleNodes(): ReadonlySet<string> {
    if (this.state.viewing) return new Set();
    return staleNodes(this.state.ranFlow, this.canvas.getSnapshot().flow);
  }

  /** Where "Run from here" starts after edits: the earliest stale node, or null. */
  earliestStaleNode(): string | null {
    return earliestStale(this.canvas.getSnapshot().flow, this.staleNodes());
  }

  // --- pins -----------------------------------------------------------------------------

  /** The edited flow's pinned outputs, by node. */
  pinsOfFlow(): Record<string, Value> {
    return this.state.pins[this.canvas.getSnapshot().path ?? ''] ?? {};
  }

  private async loadPins(path: string): Promise<void> {
    try {
      const pins = await this.api.readPins(path);
      this.set({ pins: { ...this.state.pins, [path]: pins } });
    } catch (error) {
      this.reportError(error);
    }
  }

  /**
   * Pins `value` as the output of `nodeId` in the edited flow (or, with `undefined`, unpins
   * it): the next runs do not run the node. Kept beside the flow's file when it has one.
   */
  async setPin(nodeId: string, value: Value | undefined): Promise<void> {
    const path = this.canvas.getSnapshot().path;
    const pins = { ...this.pinsOfFlow() };
    if (value === undefined) delete pins[nodeId];
    else pins[nodeId] = value;
    this.set({ pins: { ...this.state.pins, [path ?? '']: pins } });
    if (!path) return;
    try {
      await this.api.savePins(path, pins);
    } catch (error) {
      this.reportError(error);
    }
  }

  /**
   * Pins what `nodeId` gave in the past run shown for the edited flow's next runs: the output of
   * the visit picked in the inspector (`visitOutput`), else its latest.
   */
  async pinFromViewed(nodeId: string, visitOutput?: Value): Promise<void> {
    if (!this.state.viewing) return;
    if (visitOutput !== undefined && visitOutput !== null) {
      await this.setPin(nodeId, visitOutput);
      return;
    }
    const stored = this.state.viewing.nodeOutputs.find((output) => output.nodeId === nodeId);
    if (!stored || stored.output === null) return;
    await this.setPin(nodeId, stored.output);
  }

  // --- breakpoints ----------------------------------------------------------------------

  /** The edited flow's breakpoints, by node. */
  breakpointsOfFlow(): Record<string, Breakpoint> {
    return this.state.breakpoints[this.canvas.getSnapshot().path ?? ''] ?? {};
  }

  /**
   * Sets (or, with `when` null, removes) the breakpoint of `nodeId` in the edited flow: the
   * next run stops before it runs or after it ran, when `condition` (a template expression
   * with `visit`) holds, or always without one.
   */
  setBreakpoint(nodeId: string, when: BreakWhen | null, condition = ''): void {
    const flowKey = this.canvas.getSnapshot().path ?? '';
    const current = { ...(this.state.breakpoints[flowKey] ?? {}) };
    if (when === null) delete current[nodeId];
    else current[nodeId] = { nodeId, when, condition: condition === '' ? null : condition };
    this.set({ breakpoints: { ...this.state.breakpoints, [flowKey]: current } });
  }

  /** Toggles a "stop before" breakpoint on `nodeId` (F9). */
  toggleBreakpoint(nodeId: string): void {
    this.setBreakpoint(nodeId, this.breakpointsOfFlow()[nodeId] ? null : 'before');
  }

  /**
   * Goes on from the breakpoint the shown run stopped at: with `how.step`, it stops again before
   * the next steps; with `how.set`, that value replaces the one at the breakpoint.
   */
  async continueFromBreakpoint(how: Continue): Promise<void> {
    if (this.state.viewing?.server) {
      await this.actOnViewedServerRun({ continue: how });
      return;
    }
    await this.goOnFromPause((runId, onEvent) => this.api.continueRun(runId, how, onEvent));
  }

  /**
   * Continues, pauses or cancels the server run shown, on its server; a run that goes on is
   * followed again.
   */
  private async actOnViewedServerRun(action: ServerAction): Promise<void> {
    const viewing = this.state.viewing;
    if (!viewing?.server || this.state.busy) return;
    const { server } = viewing;
    const runId = viewing.run.summary.id;
    this.set({ busy: true });
    try {
      await this.api.actOnServer(server, runId, action);
    } catch (error) {
      this.reportError(error);
      return;
    } finally {
      this.set({ busy: false });
    }
    // A continued run goes on: shown again, and followed. A pause or a cancel shows in the
    // events of the run followed already.
    if (typeof action !== 'string' && this.isViewed(server, runId)) await this.openRun(runId, server);
  }

  // --- history --------------------------------------------------------------------------

  async refreshHistory(): Promise<void> {
    try {
      const listed = await this.api.listRuns(HISTORY_LIMIT);
      this.set({
        history: listed.runs.map(({ cost: _cost, ...entry }) => entry),
        historyCosts: Object.fromEntries(listed.runs.map((entry) => [runKey(entry), entry.cost])),
        historyProblems: listed.problems,
      });
    } catch (error) {
      this.reportError(error);
    }
  }

  /** Compares two past runs node by node (each of this store or of a server); the comparison shows in History. */
  async compareRuns(a: RunRef, b: RunRef): Promise<void> {
    try {
      this.set({ comparison: await this.api.compareRuns(a, b) });
    } catch (error) {
      this.reportError(error);
    }
  }

  closeComparison(): void {
    this.set({ comparison: null });
  }

  // --- versions -------------------------------------------------------------------------

  /** Reads the open file's versions from the store (none for a flow not saved yet). */
  async refreshVersions(): Promise<void> {
    const { path } = this.canvas.getSnapshot();
    if (!path) {
      this.set({ versions: null });
      return;
    }
    try {
      const versions = await this.api.flowVersions(path);
      if (this.canvas.getSnapshot().path === path) this.set({ versions });
    } catch (error) {
      this.reportError(error);
    }
  }

  /**
   * Compares the open flow with `against` (a version's hash, a run's id, a flow file) and
   * marks what changed on the canvas. Returns whether it could.
   */
  async compareFlowWith(against: string): Promise<boolean> {
    const { flow, path } = this.canvas.getSnapshot();
    try {
      const comparison = await this.api.compareFlow(flow, path, against);
      this.leaveViewing();
      this.set({ flowCompare: flowCompareView(against, comparison) });
      return true;
    } catch (error) {
      this.reportError(error);
      return false;
    }
  }

  closeFlowCompare(): void {
    this.set({ flowCompare: null });
  }

  /**
   * Puts the compared version on the canvas in place of the open flow: one edit, which Undo
   * takes back; saving it writes it to the file.
   */
  restoreCompared(): void {
    const compared = this.state.flowCompare;
    if (!compared || this.state.viewing) return;
    const restored = compared.other;
    this.canvas.update(() => restored);
    this.set({ flowCompare: null });
  }

  /** The comparison worked out again for the edited flow (after an edit), against the version it has. */
  private async recompare(): Promise<void> {
    const compared = this.state.flowCompare;
    if (!compared) return;
    const { flow } = this.canvas.getSnapshot();
    try {
      const diff = await this.api.diffFlows(compared.other, flow);
      // A comparison closed or replaced meanwhile is left as it is.
      if (this.state.flowCompare === compared && this.canvas.getSnapshot().flow === flow) {
        this.set({ flowCompare: flowCompareView(compared.against, { against: compared.other, label: compared.label, diff }) });
      }
    } catch (error) {
      this.reportError(error);
    }
  }


  /**
   * Replays the past run shown: the edited flow runs with that run's input, and every LLM
   * request identical to one it recorded gets the recorded answer with no provider call; the
   * first that differs (an edited prompt, say), and what follows it, goes live.
   */
  async replayViewed(): Promise<void> {
    const viewed = this.state.viewing;
    if (!viewed || viewed.server || this.state.busy) return;
    const input = typeof viewed.run.input === 'string' ? viewed.run.input : JSON.stringify(viewed.run.input);
    this.leaveViewing();
    await this.startRun(input, null, viewed.run.summary.id);
  }

  /**
   * Why a past run cannot be opened now, or null: the live run's events would have nowhere
   * to go while another run is shown.
   */
  openRunBlockedReason(): string | null {
    const liveGoing = !this.state.viewing && this.run.getSnapshot().status === 'running';
    return this.state.busy || liveGoing ? 'Past runs open when the run going now ends.' : null;
  }

  /**
   * Shows a past run on the canvas: its flow, replayed statuses, log and outputs. A run of a
   * team's server (`server`) that is still going is followed live until it ends or pauses.
   */
  async openRun(runId: string, server: string | null = null): Promise<void> {
    if (this.openRunBlockedReason() !== null) return;
    try {
      const stored = await this.api.openRun(runId, server);
      this.showViewed({ ...stored, flow: canvasFlow(stored.flow), server });
      if (server && stored.run.summary.status === 'running') void this.followServerRun(server, stored);
    } catch (error) {
      this.reportError(error);
    }
  }

  private showViewed(detail: ViewedRun): void {
    const before = this.state.viewing;
    if (!before) {
      this.liveView = this.run.getSnapshot();
      this.liveVisits = this.state.visits;
    } else if (before.server && !(before.server === detail.server && before.run.summary.id === detail.run.summary.id)) {
      // The server run shown until now is followed no more.
      void this.api.stopFollowing(before.server, before.run.summary.id);
    }
    this.run.show(runViewFromDetail(detail, this.runnableNodeIds(detail.flow)));
    this.set({ viewing: detail, viewSelection: null, visits: null });
    this.showLog();
    void this.refreshVisits();
  }

  /** Whether `detail`'s run is the one shown. */
  private isViewed(server: string, runId: string): boolean {
    const viewing = this.state.viewing;
    return viewing !== null && viewing.server === server && viewing.run.summary.id === runId;
  }

  /**
   * Paints the events of a server's run shown as the server stores them, then shows the run as
   * it ended or paused (its outputs, visits and cost). Showing something else ends it.
   */
  private async followServerRun(server: string, stored: RunDetail): Promise<void> {
    const runId = stored.run.summary.id;
    const after = stored.events.length > 0 ? stored.events[stored.events.length - 1].seq : 0;
    try {
      const ended = await this.api.followServerRun(server, runId, after, (event) => {
        if (this.isViewed(server, runId)) this.run.push(event);
      });
      if (ended && this.isViewed(server, runId)) {
        this.showViewed({ ...ended, flow: canvasFlow(ended.flow), server });
        void this.refreshHistory();
      }
    } catch (error) {
      if (this.isViewed(server, runId)) this.reportError(error);
    }
  }

  /** Back to the edited flow (which was never touched) and its last live run. */
  backToEditing(): void {
    if (this.state.busy) return;
    this.leaveViewing();
  }

  private leaveViewing(): void {
    if (!this.state.viewing) return;
    const { server, run } = this.state.viewing;
    if (server) void this.api.stopFollowing(server, run.summary.id);
    this.run.show(this.liveView ?? emptyRunView());
    this.liveView = null;
    this.set({ viewing: null, viewSelection: null, visits: this.liveVisits });
    this.liveVisits = null;
  }

  selectInView(nodeId: string | null): void {
    this.set({ viewSelection: nodeId });
  }

  dismissPausedBanner(): void {
    this.set({ pausedBannerDismissed: true });
  }

  private set(patch: Partial<SessionState>): void {
    this.state = { ...this.state, ...patch };
    for (const listener of [...this.listeners]) listener();
  }
}
