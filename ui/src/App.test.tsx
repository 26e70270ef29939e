// The canvas as a person uses it, against a fake backend: adding a node from the palette,
// validation problems blocking Run, and a run's events reaching the nodes and the log.

import { act, cleanup, fireEvent, render, screen, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { App } from './App';
import type { Api } from './api';
import type {
  CaseReport,
  CaseSpec,
  Cost,
  Decision,
  FileVersion,
  Flow,
  FlowDiff,
  NodeOutputRecord,
  NodeVisit,
  PendingApproval,
  Problem,
  RunComparison,
  RunCost,
  RunDetail,
  RunEvent,
  RunSummary,
  SettingsChange,
  SettingsView,
  TestsView,
  Value,
  Waiting,
} from './bindings';
import type { CanvasFlow } from './flowMapping';
import { CanvasStore } from './canvasStore';
import { RunStore } from './runStore';
import { DEFAULT_LAYOUT, LayoutStore, LIMITS } from './layout';
import { Session } from './session';
import { catalog, event, offlineEventsAfterApprove, offlineEventsToPause, offlineFlow } from './test/fixtures';

const NO_CALLS: Cost = { calls: 0, inputTokens: 0, outputTokens: 0, usd: 0, unpricedModels: [] };
const NO_COST: RunCost = { total: NO_CALLS, nodes: {}, calls: [] };

/** A completed past run of the offline flow. */
function pastRun(id: string): RunSummary {
  return {
    id,
    flowName: 'Refund desk (offline)',
    flowPath: null,
    status: 'completed',
    startedAt: '2026-11-21T20:56:18.000Z',
    endedAt: '2026-11-21T20:56:19.000Z',
    updatedAt: '2026-11-21T20:56:19.000Z',
    waitingNodeId: null,
    trigger: { kind: 'schedule', occurrence: '2026-11-21T20:56:00Z', schedule: 0 },
  };
}

function settingsView(): SettingsView {
  return { providers: [], defaultModel: '', userName: '', prices: '', mcpServers: '', people: '', variables: [], servers: [], settingsFile: '/c/settings.json', runStore: '/d/runs.db' };
}

function fakeApi(overrides: Partial<Api> = {}): Api {
  const fail = () => Promise.reject({ code: 'badRequest', message: 'not in this test' });
  return {
    describeKinds: () => Promise.resolve(catalog),
    openFlow: fail,
    saveFlow: (path) => Promise.resolve(path),
    recentFiles: () => Promise.resolve([]),
    pickFile: () => Promise.resolve(null),
    onFileDrop: () => Promise.resolve(() => {}),
    startupFile: () => Promise.resolve(null),
    validateFlow: () => Promise.resolve([]),
    upcomingSchedules: () => Promise.resolve([]),
    startRun: fail,
    resumeRun: fail,
    retryRun: fail,
    continueRun: fail,
    cancelRun: (runId) => Promise.resolve({ runId, status: 'cancelled' }),
    pauseRun: () => Promise.resolve(true),
    listRuns: () => Promise.resolve({ runs: [], problems: [] }),
    compareRuns: fail,
    flowVersions: (path) => Promise.resolve({ path, current: null, versions: [] }),
    compareFlow: fail,
    diffFlows: fail,
    readPins: () => Promise.resolve({}),
    savePins: () => Promise.resolve(null),
    openRun: fail,
    runVisits: () => Promise.resolve({ visits: [], cost: NO_COST }),
    pendingApprovals: () => Promise.resolve({ approvals: [], problems: [] }),
    decideOnServer: fail,
    followServerRun: fail,
    stopFollowing: () => Promise.resolve(),
    actOnServer: fail,
    serverFlows: () => Promise.resolve({ flows: [], problems: [] }),
    openServerFlow: fail,
    runOnServer: fail,
    readTests: () => Promise.resolve({ testsFile: '/flows/offline.tests.json', exists: false, cases: [], problem: null }),
    runTests: fail,
    caseFromRun: fail,
    saveTestCase: fail,
    getSettings: fail,
    saveSettings: fail,
    testConnection: fail,
    checkServer: fail,
    listMcpTools: fail,
    ...overrides,
  };
}

async function mount(api: Api) {
  const session = new Session(api, {
    canvas: new CanvasStore(offlineFlow(), '/flows/offline.json'),
    run: new RunStore((flush) => flush()),
  });
  await act(() => session.init());
  render(<App session={session} />);
  return session;
}

afterEach(cleanup);

/** A stored run as `openRun` answers it, from the parts a test cares about. */
function stored(parts: {
  summary: RunSummary;
  flow: CanvasFlow;
  input: Value;
  result: Value | null;
  error: string | null;
  waiting: Waiting | null;
  events: RunEvent[];
  outputs: NodeOutputRecord[];
  cost: RunCost;
}): RunDetail {
  return {
    run: {
      summary: parts.summary,
      flowJson: JSON.stringify(parts.flow),
      flowVersion: null,
      input: parts.input,
      result: parts.result,
      error: parts.error,
      waiting: null,
      queue: [],
      state: {},
      usage: { inputTokens: 0, outputTokens: 0 },
      host: null,
    },
    flow: parts.flow,
    waiting: parts.waiting,
    cost: parts.cost,
    nodeOutputs: parts.outputs,
    visits: [],
    events: parts.events,
  };
}

describe('App', () => {
  it('shows a new flow’s start node where it stays from the first frame, not moved there after', async () => {
    const session = new Session(fakeApi(), { run: new RunStore((flush) => flush()) });
    await act(() => session.init());
    const { container } = render(<App session={session} />);
    const start = session.canvas.getSnapshot().flow.nodes[0].position;
    const viewport = container.querySelector<HTMLElement>('.react-flow__viewport');
    // Read before any timer has run: the view a person sees in the window's first frame.
    expect(viewport?.style.transform.replace(/\s/g, '')).toBe(`translate(${80 - (start?.x ?? 0)}px,${140 - (start?.y ?? 0)}px)scale(1)`);
  });

  it('draws the fit buttons’ icon, not a character the usual sans-serif fonts lack', async () => {
    // ⤢ is missing from DejaVu Sans and others: WebKit searched every font for it in the first frame.
    const session = new Session(fakeApi(), { run: new RunStore((flush) => flush()) });
    await act(() => session.init());
    render(<App session={session} />);
    for (const id of ['fit-view', 'fit-readable']) {
      const button = screen.getByTestId(id);
      expect(button.textContent).toBe('');
      expect(button.querySelector('svg[aria-hidden="true"] path')).not.toBeNull();
    }
  });

  it('is drawn once the kinds are in, and also when they cannot be had, with the reason', async () => {
    // main.tsx draws the window from this call: the first frame has the palette.
    const session = new Session(fakeApi(), { run: new RunStore((flush) => flush()) });
    const seenAtDraw: (string | undefined)[][] = [];
    await act(() => session.init(() => seenAtDraw.push(session.getSnapshot().catalog?.kinds.map((kind) => kind.id) ?? [undefined])));
    expect(seenAtDraw).toHaveLength(1);
    expect(seenAtDraw[0]).toContain('agent');

    const failing = new Session(fakeApi({ describeKinds: () => Promise.reject(new Error('the engine did not start')) }), {
      run: new RunStore((flush) => flush()),
    });
    const errorsAtDraw: string[][] = [];
    await act(() => failing.init(() => errorsAtDraw.push(failing.getSnapshot().errors.map((banner) => banner.message))));
    expect(errorsAtDraw).toEqual([[expect.stringContaining('the engine did not start')]]);
  });

  it('adds a node of a kind from the palette, marking the flow dirty', async () => {
    const session = await mount(fakeApi());
    expect(screen.getByTestId('title').dataset.dirty).toBe('false');
    fireEvent.click(screen.getByTestId('palette-agent'));
    await screen.findByTestId('node-agent-1');
    expect(screen.getByTestId('title').dataset.dirty).toBe('true');
    expect(screen.getByTestId('title').textContent).toContain('•');
    const added = session.canvas.getSnapshot().flow.nodes.at(-1)!;
    expect(added.data).toMatchObject({ label: 'Agent', userPrompt: '', tools: { web_search: false, subagents: false } });
    // The new node is selected: the inspector shows its fields.
    expect((screen.getByTestId('field-label') as HTMLInputElement).value).toBe('Agent');
    expect(screen.getByTestId('field-tools.web_search')).toBeTruthy();
  });

  it('opens the flow file named on the command line first', async () => {
    const opened = { ...offlineFlow(), name: 'From the command line' };
    const session = await mount(
      fakeApi({
        startupFile: () => Promise.resolve('/work/flows/cli.json'),
        openFlow: (path) => Promise.resolve({ path, flow: opened }),
      }),
    );
    expect(session.canvas.getSnapshot().path).toBe('/work/flows/cli.json');
    expect(screen.getByTestId('title').textContent).toContain('cli.json');
    expect(screen.getByTestId('title').dataset.dirty).toBe('false');
  });

  it('blocks Run while the validator reports an error, and says why', async () => {
    const problem = { severity: 'error', code: 'if-branches', nodeId: 'large', message: 'the if has no branch' } as Problem;
    await mount(fakeApi({ validateFlow: () => Promise.resolve([problem]) }));
    expect((screen.getByTestId('run') as HTMLButtonElement).disabled).toBe(true);
    expect(screen.getByTestId('run-blocked-reason').textContent).toBe('1 problem: node large: the if has no branch');
    expect(screen.getByTestId('node-large').dataset.invalid).toBe('true');
    fireEvent.click(screen.getByTestId('tab-problems'));
    const row = screen.getByTestId('problem');
    expect(row.dataset.code).toBe('if-branches');
    expect(row.dataset.nodeId).toBe('large');
  });

  it('shows a run pausing at the approval, and approving it on the canvas', async () => {
    const startRun = vi.fn((_request, onEvent: (event: RunEvent) => void) => {
      offlineEventsToPause().forEach(onEvent);
      return Promise.resolve('6c4ba313-67fb-4e7c-bbc7-63ab45649f30');
    });
    const resumeRun = vi.fn((_runId: string, _decision: Decision, onEvent: (event: RunEvent) => void) => {
      offlineEventsAfterApprove().forEach(onEvent);
      return Promise.resolve({ runId: '6c4ba313-67fb-4e7c-bbc7-63ab45649f30', approval: null });
    });
    await mount(fakeApi({ startRun, resumeRun }));
    fireEvent.change(screen.getByTestId('run-input'), { target: { value: 'hello' } });
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    expect(startRun.mock.calls[0][0]).toMatchObject({ path: '/flows/offline.json', input: 'hello' });
    expect(screen.getByTestId('run-status').textContent).toBe('paused');
    expect(screen.getByTestId('node-review').dataset.status).toBe('paused');
    expect(screen.getByTestId('node-summary').dataset.status).toBe('done');
    const prompt = within(screen.getByTestId('node-review')).getByTestId('approval-prompt');
    expect(within(prompt).getByTestId('approval-message').textContent).toContain('Approve the refund?');

    fireEvent.change(within(prompt).getByTestId('approval-note'), { target: { value: 'fine' } });
    await act(async () => fireEvent.click(within(prompt).getByTestId('approve')));
    expect(resumeRun.mock.calls[0].slice(0, 2)).toEqual(['6c4ba313-67fb-4e7c-bbc7-63ab45649f30', { decision: 'approve', note: 'fine', fields: {} }]);
    expect(screen.getByTestId('run-status').textContent).toBe('completed');
    expect(screen.getByTestId('node-auto').dataset.status).toBe('skipped');
    expect(screen.getByTestId('node-refunded').dataset.status).toBe('done');
    expect(screen.getAllByTestId('log-row')).toHaveLength(18);
  });

  it('keeps an approval of two counted: the run stays paused and says who is still needed', async () => {
    const startRun = vi.fn((_request, onEvent: (event: RunEvent) => void) => {
      offlineEventsToPause().forEach(onEvent);
      return Promise.resolve('6c4ba313-67fb-4e7c-bbc7-63ab45649f30');
    });
    const progress = { required: 2, approvedBy: ['grace'], stillNeeded: 1, mayStillApprove: ['bob'], allowSelf: false };
    const resumeRun = vi.fn(() => Promise.resolve({ runId: '6c4ba313-67fb-4e7c-bbc7-63ab45649f30', approval: progress }));
    await mount(fakeApi({ startRun, resumeRun }));
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    const prompt = within(screen.getByTestId('node-review')).getByTestId('approval-prompt');
    await act(async () => fireEvent.click(within(prompt).getByTestId('approve')));
    expect(resumeRun).toHaveBeenCalledTimes(1);
    expect(screen.getByTestId('run-status').textContent).toBe('paused');
    expect(screen.getByTestId('node-review').dataset.status).toBe('paused');
    expect(document.body.textContent).toContain('1 of 2 (approved by grace); still needed: 1 more, from bob');
  });

  it('lists a team server’s approvals marked with the server, decides them there, and names a server that cannot answer', async () => {
    const remote: PendingApproval = {
      runId: 'server-run',
      flow: 'pay',
      flowName: 'Pay',
      flowPath: '/srv/flows/pay.json',
      since: '2026-11-21T20:56:18.000Z',
      nodeId: 'review',
      message: 'Pay 40 EUR?',
      input: '40 EUR',
      server: 'team',
    };
    let pending = [remote];
    const decideOnServer = vi.fn((_server: string, runId: string, _decision: Decision) => {
      pending = [];
      return Promise.resolve({ runId, approval: null });
    });
    const resumeRun = vi.fn(() => Promise.resolve({ runId: 'x', approval: null }));
    await mount(
      fakeApi({
        pendingApprovals: () => Promise.resolve({ approvals: pending, problems: ['server `eu`: cannot reach http://10.0.0.9:8420: connection refused'] }),
        decideOnServer,
        resumeRun,
      }),
    );
    await act(async () => fireEvent.click(screen.getByTestId('tab-inbox')));
    expect(screen.getByTestId('inbox-server-problem').textContent).toContain('server `eu`: cannot reach');
    const item = screen.getByTestId('inbox-item');
    expect(item.dataset.server).toBe('team');
    expect(within(item).getByTestId('inbox-server').textContent).toBe('team');
    expect((within(item).getByTestId('inbox-open-run') as HTMLButtonElement).disabled).toBe(false);
    fireEvent.change(within(item).getByTestId('inbox-approval-note'), { target: { value: 'budgeted' } });
    await act(async () => fireEvent.click(within(item).getByTestId('inbox-approve')));
    expect(decideOnServer).toHaveBeenCalledWith('team', 'server-run', { decision: 'approve', note: 'budgeted', fields: {} });
    expect(resumeRun).not.toHaveBeenCalled();
    expect(screen.queryByTestId('inbox-item')).toBeNull();
  });

  it('disables deciding for a person the approval does not allow, saying why, everywhere it is asked', async () => {
    const RUN = '6c4ba313-67fb-4e7c-bbc7-63ab45649f30';
    const why = 'bob started run 6c4ba313, and `review` does not let whoever started a run decide it (allowSelf: false)';
    const pending: PendingApproval[] = [
      {
        runId: RUN,
        flow: 'offline',
        flowName: 'Refund desk (offline)',
        flowPath: '/flows/offline.json',
        since: '2026-11-21T20:56:18.000Z',
        nodeId: 'review',
        message: 'Approve the refund?',
        input: 'Dear Ada',
        approval: { required: 2, approvedBy: [], stillNeeded: 2, mayStillApprove: ['ada', 'grace'], allowSelf: false },
        refusal: why,
      },
    ];
    const startRun = vi.fn((_request, onEvent: (event: RunEvent) => void) => {
      offlineEventsToPause().forEach(onEvent);
      return Promise.resolve(RUN);
    });
    const resumeRun = vi.fn(() => Promise.resolve({ runId: RUN, approval: null }));
    const session = await mount(fakeApi({ pendingApprovals: () => Promise.resolve({ approvals: pending, problems: [] }), startRun, resumeRun }));
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    await act(() => session.refreshInbox());
    const prompt = within(screen.getByTestId('node-review')).getByTestId('approval-prompt');
    const card = screen.getByTestId('paused-card');
    await act(async () => fireEvent.click(screen.getByTestId('tab-inbox')));
    const item = screen.getByTestId('inbox-item');
    for (const [where, prefix] of [
      [prompt, ''],
      [card, 'panel-'],
      [item, 'inbox-'],
    ] as const) {
      expect(within(where).getByTestId(`${prefix}refusal`).textContent).toBe(why);
      for (const button of ['approve', 'reject']) {
        const shown = within(where).getByTestId(`${prefix}${button}`) as HTMLButtonElement;
        expect(shown.disabled).toBe(true);
        expect(shown.title).toBe(why);
        await act(async () => fireEvent.click(shown));
      }
    }
    expect(resumeRun).not.toHaveBeenCalled();
  });

  it('stops at a breakpoint set with F9 and goes on with a replaced value', async () => {
    const startRun = vi.fn((_request, onEvent: (event: RunEvent) => void) => {
      onEvent(event(1, 'run_start', null, 'x'));
      onEvent(event(2, 'step_start', 'start', 'Request'));
      onEvent(event(3, 'step_end', 'start', 'x'));
      onEvent(event(4, 'wait_input', 'summary', 'breakpoint before `summary` (visit 1): its input is x'));
      return Promise.resolve('6c4ba313-67fb-4e7c-bbc7-63ab45649f30');
    });
    const continueRun = vi.fn((_runId: string, _how: unknown, onEvent: (event: RunEvent) => void) => {
      onEvent(event(5, 'logic_check', 'summary', 'value at the breakpoint before `summary` replaced by the person: "y"'));
      onEvent(event(6, 'step_start', 'summary', 'Summarize'));
      onEvent(event(7, 'step_end', 'summary', 'y'));
      onEvent(event(8, 'run_end', null, '{"error":null,"result":"y","status":"completed"}'));
      return Promise.resolve('6c4ba313-67fb-4e7c-bbc7-63ab45649f30');
    });
    const session = await mount(fakeApi({ startRun, continueRun }));
    act(() => session.canvas.select(['summary'], []));
    fireEvent.keyDown(window, { key: 'F9' });
    expect(screen.getByTestId('breakpoint-summary').dataset.when).toBe('before');
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    expect(startRun.mock.calls[0][0]).toMatchObject({ breakpoints: [{ nodeId: 'summary', when: 'before', condition: null }] });
    const prompt = within(screen.getByTestId('node-summary')).getByTestId('breakpoint-prompt');
    expect(within(prompt).getByTestId('breakpoint-message').textContent).toContain('its input is x');
    expect(within(screen.getByTestId('node-summary')).queryByTestId('approve')).toBeNull();

    // Not JSON: said at once, and nothing is sent.
    fireEvent.change(within(prompt).getByTestId('breakpoint-value'), { target: { value: 'y' } });
    fireEvent.click(within(prompt).getByTestId('breakpoint-continue'));
    expect(within(prompt).getByTestId('breakpoint-problem').textContent).toContain('Not JSON');
    expect(continueRun).not.toHaveBeenCalled();
    fireEvent.change(within(prompt).getByTestId('breakpoint-value'), { target: { value: '"y"' } });
    await act(async () => fireEvent.click(within(prompt).getByTestId('breakpoint-continue')));
    expect(continueRun.mock.calls[0][1]).toEqual({ step: false, set: 'y' });
    expect(screen.getByTestId('run-status').textContent).toBe('completed');

    // F9 again: no breakpoint.
    fireEvent.keyDown(window, { key: 'F9' });
    expect(screen.queryByTestId('breakpoint-summary')).toBeNull();
  });

  it('pins a typed output or one from a past run, keeps it beside the flow and runs with it', async () => {
    const savePins = vi.fn((_path: string, _pins: Record<string, unknown>) => Promise.resolve(null));
    const startRun = vi.fn(() => Promise.resolve('6c4ba313-67fb-4e7c-bbc7-63ab45649f30'));
    const session = await mount(
      fakeApi({
        savePins,
        startRun,
        openRun: () =>
          Promise.resolve(stored({
            summary: pastRun('past-run-1'),
            flow: offlineFlow(),
            input: 'x',
            result: 'done',
            error: null,
            waiting: null,
            events: [],
            outputs: [
              {
                nodeId: 'summary',
                output: { customer: 'Ada' },
                visits: 1,
                approval: null,
                updatedAt: '2026-11-21T20:56:19.000Z',
                usage: { inputTokens: 0, outputTokens: 0 },
                metadata: null,
              },
            ],
            cost: NO_COST,
          })),
      }),
    );
    act(() => session.canvas.select(['auto'], []));
    await act(async () => fireEvent.click(screen.getByTestId('tab-inspector')));
    fireEvent.change(screen.getByTestId('pin-value'), { target: { value: '{"approved": true' } });
    fireEvent.click(screen.getByTestId('pin-typed'));
    expect(savePins).not.toHaveBeenCalled();
    fireEvent.change(screen.getByTestId('pin-value'), { target: { value: '{"approved": true}' } });
    await act(async () => fireEvent.click(screen.getByTestId('pin-typed')));
    expect(savePins).toHaveBeenLastCalledWith('/flows/offline.json', { auto: { approved: true } });
    expect(screen.getByTestId('pin-auto')).toBeTruthy();

    // From a past run: the output it stored, pinned for the edited flow.
    await act(() => session.openRun('past-run-1'));
    act(() => session.selectInView('summary'));
    await act(async () => fireEvent.click(screen.getByTestId('pin-output')));
    expect(savePins).toHaveBeenLastCalledWith('/flows/offline.json', {
      auto: { approved: true },
      summary: { customer: 'Ada' },
    });
    act(() => session.backToEditing());
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    expect((startRun.mock.calls[0] as unknown[])[0]).toMatchObject({
      pins: { auto: { approved: true }, summary: { customer: 'Ada' } },
    });
  });

  it('marks what an edit made stale and offers to run from the earliest stale node', async () => {
    const startRun = vi.fn((_request, onEvent: (event: RunEvent) => void) => {
      onEvent(event(1, 'run_start', null, 'x'));
      onEvent(event(2, 'run_end', null, '{"error":null,"result":"x","status":"completed"}'));
      return Promise.resolve('6c4ba313-67fb-4e7c-bbc7-63ab45649f30');
    });
    const session = await mount(fakeApi({ startRun }));
    expect(screen.queryByTestId('run-from-stale')).toBeNull();
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    expect(screen.queryByTestId('stale-summary')).toBeNull();
    act(() => session.canvas.setNodeField('summary', 'template', '{{ customer }}!'));
    expect(screen.getByTestId('stale-summary')).toBeTruthy();
    expect(screen.getByTestId('stale-review')).toBeTruthy();
    expect(screen.queryByTestId('stale-start')).toBeNull();
    const runFrom = screen.getByTestId('run-from-stale') as HTMLButtonElement;
    expect(runFrom.dataset.nodeId).toBe('summary');
    expect(runFrom.textContent).toContain('Summarize');
    await act(async () => fireEvent.click(runFrom));
    expect((startRun.mock.calls[1] as unknown[])[0]).toMatchObject({
      from: { runId: '6c4ba313-67fb-4e7c-bbc7-63ab45649f30', nodeId: 'summary', only: false },
    });
    // The run from there stands for the flow as edited: nothing is stale any more.
    expect(screen.queryByTestId('stale-summary')).toBeNull();
    expect(screen.queryByTestId('run-from-stale')).toBeNull();
  });

  it('stops painting a run on the canvas once another flow is opened, and lets the new one run', async () => {
    let emit: (event: RunEvent) => void = () => {};
    const startRun = vi.fn((_request, onEvent: (event: RunEvent) => void) => {
      emit = onEvent;
      onEvent(event(1, 'run_start', null, 'x'));
      onEvent(event(2, 'step_start', 'start', 'Request'));
      return Promise.resolve('6c4ba313-67fb-4e7c-bbc7-63ab45649f30');
    });
    const other = { ...offlineFlow(), name: 'Another flow' };
    const session = await mount(
      fakeApi({ startRun, openFlow: (path) => Promise.resolve({ path, flow: other }) }),
    );
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    expect(screen.getByTestId('run-status').textContent).toBe('running');
    const run = screen.getByTestId('run') as HTMLButtonElement;
    expect([run.disabled, run.title]).toEqual([true, 'A run is going.']);

    await act(() => session.open('/flows/other.json'));
    // The old run's later events (a step, its end) do not paint the new flow.
    await act(async () => {
      emit(event(3, 'step_end', 'start', 'x'));
      emit(event(4, 'step_start', 'summary', 'Summarize', { from: 'start' }));
      emit(event(5, 'run_end', null, '{"error":null,"result":"x","status":"completed"}'));
    });
    expect(screen.getByTestId('run-status').textContent).toBe('');
    expect(screen.getByTestId('node-summary').dataset.status).toBe('idle');
    expect(screen.queryAllByTestId('log-row')).toHaveLength(0);
    expect((screen.getByTestId('run') as HTMLButtonElement).disabled).toBe(false);
  });

  it('shows a step cut off by Cancel as cancelled, and colours the run’s end by its status', async () => {
    const startRun = vi.fn((_request, onEvent: (event: RunEvent) => void) => {
      onEvent(event(1, 'run_start', null, 'x'));
      onEvent(event(2, 'step_start', 'start', 'Request'));
      onEvent(event(3, 'step_end', 'start', 'x'));
      onEvent(event(4, 'step_start', 'summary', 'Summarize', { from: 'start' }));
      return Promise.resolve('6c4ba313-67fb-4e7c-bbc7-63ab45649f30');
    });
    let cancelled = '';
    const session = await mount(
      fakeApi({
        startRun,
        cancelRun: (runId) => {
          cancelled = runId;
          return Promise.resolve({ runId, status: 'cancelled' });
        },
      }),
    );
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    await act(async () => fireEvent.click(screen.getByTestId('cancel')));
    expect(cancelled).toBe('6c4ba313-67fb-4e7c-bbc7-63ab45649f30');
    await act(async () =>
      session.run.push(event(5, 'run_end', null, '{"error":"the run was cancelled","result":null,"status":"cancelled"}')),
    );
    expect(screen.getByTestId('node-summary').dataset.status).toBe('cancelled');
    expect(screen.getByTestId('status-summary').textContent).toBe('cancelled');
    const end = screen.getAllByTestId('log-row').find((row) => row.dataset.type === 'run_end')!;
    expect(end.dataset.status).toBe('cancelled');
    expect(end.className).toContain('status-cancelled');
  });

  it('does not show the edited flow’s problems as the reason while a past run is viewed', async () => {
    const problem = { severity: 'error', code: 'if-branches', nodeId: 'large', message: 'the if has no branch' } as Problem;
    const summary = pastRun('past-run-1');
    const session = await mount(
      fakeApi({
        validateFlow: () => Promise.resolve([problem]),
        openRun: () =>
          Promise.resolve(stored({
            summary,
            flow: offlineFlow(),
            input: 'x',
            result: 'done',
            error: null,
            waiting: null,
            events: [event(1, 'run_start', null, 'x', { runId: 'past-run-1' })],
            outputs: [],
            cost: NO_COST,
          })),
      }),
    );
    expect(screen.getByTestId('run-blocked-reason').textContent).toContain('the if has no branch');
    await act(() => session.openRun('past-run-1'));
    const reason = screen.getByTestId('run-blocked-reason').textContent ?? '';
    expect(reason).not.toContain('the if has no branch');
    expect(reason).toContain('past run');
  });

  it('continues an interrupted past run from History, its steps cut off shown as such', async () => {
    const summary: RunSummary = {
      id: 'cut-run-1',
      flowName: 'Refund desk (offline)',
      flowPath: null,
      status: 'interrupted',
      startedAt: '2026-11-21T20:56:18.000Z',
      endedAt: null,
      updatedAt: '2026-11-21T20:56:18.000Z',
      waitingNodeId: null,
      trigger: null,
    };
    const cut = [
      event(1, 'run_start', null, 'x', { runId: 'cut-run-1' }),
      event(2, 'step_start', 'start', 'Request', { runId: 'cut-run-1' }),
      event(3, 'step_end', 'start', 'x', { runId: 'cut-run-1' }),
      event(4, 'step_start', 'summary', 'Summarize', { runId: 'cut-run-1', from: 'start' }),
    ];
    const retryRun = vi.fn((_runId: string, onEvent: (event: RunEvent) => void) => {
      onEvent(event(5, 'logic_check', null, 'continuing after an interruption', { runId: 'cut-run-1' }));
      onEvent(event(6, 'step_start', 'summary', 'Summarize', { runId: 'cut-run-1', from: 'start' }));
      onEvent(event(7, 'step_end', 'summary', 'done', { runId: 'cut-run-1' }));
      onEvent(event(8, 'run_end', null, '{"error":null,"result":"done","status":"completed"}', { runId: 'cut-run-1' }));
      return Promise.resolve('cut-run-1');
    });
    const session = await mount(
      fakeApi({
        retryRun,
        listRuns: () => Promise.resolve({ runs: [{ ...summary, cost: NO_CALLS }], problems: [] }),
        openRun: () =>
          Promise.resolve(stored({
            summary,
            flow: offlineFlow(),
            input: 'x',
            result: null,
            error: 'interrupted: the process that ran it stopped before the run ended',
            waiting: null,
            events: cut,
            outputs: [],
            cost: NO_COST,
          })),
      }),
    );
    await act(() => session.openRun('cut-run-1'));
    expect(screen.getByTestId('run-status').textContent).toBe('interrupted');
    expect(screen.getByTestId('node-summary').dataset.status).toBe('cancelled');
    expect(screen.getByTestId('node-large').dataset.status).toBe('idle');
    await act(async () => fireEvent.click(screen.getByTestId('continue-run')));
    expect(retryRun.mock.calls[0][0]).toBe('cut-run-1');
    expect(screen.getByTestId('run-status').textContent).toBe('completed');
    expect(screen.getByTestId('node-summary').dataset.status).toBe('done');
    expect(screen.queryByTestId('continue-run')).toBeNull();
  });

  it('reads History again while a listed run is going, until it ends', async () => {
    vi.useFakeTimers();
    try {
      let status: RunSummary['status'] = 'running';
      const listRuns = vi.fn(() => Promise.resolve({ runs: [{ ...pastRun('going'), status, cost: NO_CALLS }], problems: [] }));
      await mount(fakeApi({ listRuns }));
      await act(async () => fireEvent.click(screen.getByTestId('tab-history')));
      expect(screen.getByTestId('history-row').dataset.status).toBe('running');
      status = 'completed';
      await act(async () => vi.advanceTimersByTime(1_100));
      expect(screen.getByTestId('history-row').dataset.status).toBe('completed');
      // Nothing goes on any more: no more reading.
      const reads = listRuns.mock.calls.length;
      await act(async () => vi.advanceTimersByTime(5_000));
      expect(listRuns.mock.calls.length).toBe(reads);
    } finally {
      vi.useRealTimers();
    }
  });

  it('lists each run’s cost, compares two checked runs and replays the run shown', async () => {
    const run = pastRun;
    const priced: Cost = { calls: 2, inputTokens: 120, outputTokens: 40, usd: 0.0123, unpricedModels: [] };
    const comparison: RunComparison = {
      a: { id: 'run-a', flowName: 'x', status: 'completed', durationMs: 1000, cost: priced },
      b: { id: 'run-b', flowName: 'x', status: 'completed', durationMs: 900, cost: NO_CALLS },
      flowChanges: {
        flow: [],
        settings: [],
        nodesAdded: [],
        nodesRemoved: [],
        nodesChanged: [
          {
            node: { id: 'summary', type: 'template', label: 'Summarize' },
            fields: [{ field: 'template', a: '{{ customer }}', b: 'Hi {{ customer }}' }],
          },
        ],
        nodesMoved: [],
        edgesAdded: [],
        edgesRemoved: [{ id: 'e9', source: 'large', sourceHandle: 'false', target: 'auto' }],
      },
      nodes: [
        {
          node: 'summary',
          a: { status: 'completed', visits: 1, output: 'Hello Ada', durationMs: 5, cost: priced },
          b: { status: 'completed', visits: 1, output: 'Hello Bob', durationMs: 4, cost: NO_CALLS },
          sameOutput: false,
          diff: { kind: 'text', lines: [{ kind: 'removed', text: 'Hello Ada' }, { kind: 'added', text: 'Hello Bob' }] },
        },
      ],
      equal: false,
    };
    const compareRuns = vi.fn(() => Promise.resolve(comparison));
    const startRun = vi.fn(() => Promise.resolve('run-c'));
    const session = await mount(
      fakeApi({
        listRuns: () =>
          Promise.resolve({
            runs: [
              { ...run('run-a'), cost: priced },
              { ...run('run-b'), trigger: { kind: 'api', by: 'ci' }, cost: NO_CALLS },
            ],
            problems: [],
          }),
        compareRuns,
        startRun,
        openRun: () =>
          Promise.resolve(stored({
            summary: run('run-a'),
            flow: offlineFlow(),
            input: 'the ticket',
            result: 'done',
            error: null,
            waiting: null,
            events: [],
            outputs: [],
            cost: { total: priced, nodes: { summary: priced }, calls: [] },
          })),
      }),
    );
    await act(async () => fireEvent.click(screen.getByTestId('tab-history')));
    const costs = screen.getAllByTestId('history-cost').map((cell) => cell.textContent);
    expect(costs).toEqual(['$0.0123', '—']);
    // What started each run: a schedule, a token's request (named); a run started by hand by
    // nobody named says nothing.
    expect(screen.getAllByTestId('history-trigger').map((cell) => cell.textContent)).toEqual([' · by schedule', ' · by api (ci)']);
    const compare = screen.getByTestId('history-compare') as HTMLButtonElement;
    expect(compare.disabled).toBe(true);
    const checks = screen.getAllByTestId('history-check');
    fireEvent.click(checks[0]);
    fireEvent.click(checks[1]);
    expect(compare.disabled).toBe(false);
    await act(async () => fireEvent.click(compare));
    expect(compareRuns).toHaveBeenCalledWith({ id: 'run-a', server: null }, { id: 'run-b', server: null });
    expect(screen.getByTestId('compare-verdict').textContent).toBe('Outputs differ at 1 of 1 nodes');
    // What changed in the flow between the two runs comes first.
    const changes = screen.getByTestId('compare-flow-changes');
    expect(changes.textContent).toContain('node summary: template');
    expect(changes.textContent).toContain('edge large.false → auto');
    expect(screen.getByTestId('compare-diff').textContent).toContain('- Hello Ada');
    expect(screen.getByTestId('compare-diff').textContent).toContain('+ Hello Bob');

    // The inspector of a past run's node says what its calls cost.
    await act(() => session.openRun('run-a'));
    act(() => session.selectInView('summary'));
    await act(async () => fireEvent.click(screen.getByTestId('tab-inspector')));
    expect(screen.getByTestId('node-cost').textContent).toBe('2 LLM calls · tokens 120/40 · cost $0.0123');
    act(() => session.backToEditing());
    await act(async () => fireEvent.click(screen.getByTestId('tab-history')));

    // Replay: only with a past run shown; the edited flow runs with that run's input.
    const replay = screen.getByTestId('history-replay') as HTMLButtonElement;
    expect(replay.disabled).toBe(true);
    await act(() => session.openRun('run-a'));
    expect(replay.disabled).toBe(false);
    await act(async () => fireEvent.click(replay));
    const request = (startRun.mock.calls[0] as unknown[])[0] as { replay: string; input: string };
    expect(request.replay).toBe('run-a');
    expect(request.input).toBe('the ticket');
  });

  it('lists a team server’s runs beside the local ones, follows one live, compares it, and continues it there', async () => {
    const local = { ...pastRun('run-a'), startedAt: '2026-11-21T20:50:00.000Z' };
    const remote: RunSummary = { ...pastRun('srv-1'), status: 'running', endedAt: null, trigger: { kind: 'api', by: 'ada' } };
    const scoped = (seq: number, type: RunEvent['type'], nodeId: string | null, content: string) =>
      event(seq, type, nodeId, content, { runId: 'srv-1' });
    const begun = [scoped(1, 'run_start', null, 'run started'), scoped(2, 'step_start', 'start', 'Start'), scoped(3, 'step_end', 'start', 'x')];
    const detail = (summary: RunSummary, events: RunEvent[], waiting: Waiting | null = null) =>
      stored({ summary, flow: offlineFlow(), input: 'x', result: null, error: null, waiting, events, outputs: [], cost: NO_COST });
    let endFollowing: (ended: RunDetail | null) => void = () => {};
    let pushEvent: (event: RunEvent) => void = () => {};
    const followServerRun = vi.fn((_server: string, _runId: string, _after: number, onEvent: (event: RunEvent) => void) => {
      pushEvent = onEvent;
      return new Promise<RunDetail | null>((resolve) => {
        endFollowing = resolve;
      });
    });
    const openRun = vi.fn((_runId: string, server: string | null) =>
      Promise.resolve(server === 'team' ? detail(remote, begun) : detail(local, [])),
    );
    const compareRuns = vi.fn(() => Promise.reject({ code: 'badRequest', message: 'compared' }));
    const actOnServer = vi.fn(() => Promise.resolve(null));
    const session = await mount(
      fakeApi({
        listRuns: () =>
          Promise.resolve({
            runs: [
              { ...remote, server: 'team', cost: NO_CALLS },
              { ...local, cost: NO_CALLS },
            ],
            problems: ['server `eu`: cannot reach http://10.0.0.9:8420: connection refused'],
          }),
        openRun,
        followServerRun,
        compareRuns,
        actOnServer,
      }),
    );
    await act(async () => fireEvent.click(screen.getByTestId('tab-history')));
    expect(screen.getByTestId('history-problem').textContent).toContain('server `eu`: cannot reach');
    const rows = screen.getAllByTestId('history-row');
    expect(rows.map((row) => row.dataset.server ?? null)).toEqual(['team', null]);
    expect(within(rows[0]).getByTestId('history-server').textContent).toBe('team');

    // Opened: the server's run is shown, and followed from its last event.
    await act(async () => fireEvent.click(rows[0]));
    expect(openRun).toHaveBeenCalledWith('srv-1', 'team');
    expect(followServerRun.mock.calls[0].slice(0, 3)).toEqual(['team', 'srv-1', 3]);
    expect(screen.getByTestId('run-status').textContent).toBe('running');
    act(() => pushEvent(scoped(4, 'step_start', 'summary', 'Summarize')));
    expect(screen.getByTestId('node-summary').dataset.status).toBe('running');
    // Replaying needs the recorded answers, which the server keeps.
    const replay = screen.getByTestId('history-replay') as HTMLButtonElement;
    expect(replay.disabled).toBe(true);
    expect(replay.title).toContain('server team');

    // It stops at a breakpoint on the server: shown as the server keeps it, and continued there.
    const atBreakpoint: Waiting = { nodeId: 'summary', message: 'breakpoint before `summary`: its input is x', breakpoint: 'before', pause: 1, input: 'x' };
    const paused = detail({ ...remote, status: 'paused', waitingNodeId: 'summary' }, [...begun, scoped(4, 'wait_input', 'summary', atBreakpoint.message)], atBreakpoint);
    await act(async () => endFollowing(paused));
    expect(screen.getByTestId('run-status').textContent).toBe('paused');
    const prompt = within(screen.getByTestId('node-summary')).getByTestId('breakpoint-prompt');
    fireEvent.change(within(prompt).getByTestId('breakpoint-value'), { target: { value: '"y"' } });
    await act(async () => fireEvent.click(within(prompt).getByTestId('breakpoint-continue')));
    expect(actOnServer).toHaveBeenCalledWith('team', 'srv-1', { continue: { step: false, set: 'y' } });
    // Going on, it is opened and followed again.
    expect(openRun).toHaveBeenLastCalledWith('srv-1', 'team');
    expect(followServerRun).toHaveBeenCalledTimes(2);

    // Compared with the local run: each named with where it is kept, the earlier first.
    await act(async () => fireEvent.click(screen.getByTestId('tab-history')));
    const checks = screen.getAllByTestId('history-check');
    fireEvent.click(checks[0]);
    fireEvent.click(checks[1]);
    await act(async () => fireEvent.click(screen.getByTestId('history-compare')));
    expect(compareRuns).toHaveBeenCalledWith({ id: 'run-a', server: null }, { id: 'srv-1', server: 'team' });
    act(() => session.backToEditing());
  });

  it('opens a team server’s flow and runs it there with the breakpoints and pins set here', async () => {
    const runOnServer = vi.fn(() => Promise.resolve('srv-run'));
    const remote: RunSummary = { ...pastRun('srv-run'), status: 'completed' };
    const openRun = vi.fn(() =>
      Promise.resolve(stored({ summary: remote, flow: offlineFlow(), input: 'x', result: 'done', error: null, waiting: null, events: [], outputs: [], cost: NO_COST })),
    );
    const flow = offlineFlow();
    const session = await mount(
      fakeApi({
        serverFlows: () =>
          Promise.resolve({
            flows: [
              { server: 'team', name: 'refunds', title: 'Refund desk (offline)', version: 'abcdef0123456789' },
              { server: 'team', name: 'broken', error: 'not JSON at line 1' },
            ],
            problems: ['server `eu`: cannot reach http://10.0.0.9:8420: connection refused'],
          }),
        openServerFlow: (server, name) => Promise.resolve({ server, name, version: 'abcdef0123456789', flow }),
        runOnServer,
        openRun,
      }),
    );
    await act(async () => fireEvent.click(screen.getByTestId('tab-history')));
    await act(async () => fireEvent.click(screen.getByTestId('history-servers')));
    expect(screen.getByTestId('server-flows-problem').textContent).toContain('server `eu`');
    const listed = screen.getAllByTestId('server-flow');
    expect(listed.map((row) => row.dataset.name)).toEqual(['refunds', 'broken']);
    expect((listed[1] as HTMLButtonElement).disabled).toBe(true);
    expect(listed[1].textContent).toContain('does not load: not JSON at line 1');
    await act(async () => fireEvent.click(listed[0]));
    expect(screen.getByTestId('title-server').textContent).toBe('team');
    expect(screen.getByTestId('title').textContent).toContain('refunds.json');

    // Run: on the server, with this canvas's breakpoint and pin; then shown and followed.
    act(() => session.setBreakpoint('summary', 'before'));
    await act(() => session.setPin('large', 'yes'));
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    expect(runOnServer).toHaveBeenCalledWith('team', {
      flow: 'refunds',
      input: null,
      pins: { large: 'yes' },
      breakpoints: [{ nodeId: 'summary', when: 'before', condition: null }],
    });
    expect(openRun).toHaveBeenCalledWith('srv-run', 'team');
    expect(screen.getByTestId('viewing-server').textContent).toBe('team');
    act(() => session.backToEditing());

    // Edited, it no longer is the server's file: Run says why it is not run there.
    act(() => session.canvas.update((edited) => ({ ...edited, name: 'Edited here' })));
    const run = screen.getByTestId('run') as HTMLButtonElement;
    expect(run.disabled).toBe(true);
    expect(run.title).toContain('Save as… to run your edits here');
  });

  it('shows every visit of a node with its cost, on the node and in the inspector, and pins one visit', async () => {
    const first: Cost = { calls: 1, inputTokens: 10, outputTokens: 1, usd: 0.001, unpricedModels: [] };
    const second: Cost = { calls: 1, inputTokens: 12, outputTokens: 2, usd: 0.002, unpricedModels: [] };
    const both: Cost = { calls: 2, inputTokens: 22, outputTokens: 3, usd: 0.003, unpricedModels: [] };
    const visit = (n: number, input: string, output: string, cost: Cost): NodeVisit => ({
      nodeId: 'summary',
      key: 'summary',
      visit: n,
      outerVisit: null,
      item: null,
      status: 'completed',
      input,
      output,
      error: null,
      startedAt: '2026-11-21T20:56:18.000Z',
      durationMs: 1500,
      cost,
      toolCalls:
        n === 1
          ? [{ server: 'files', tool: 'read_text_file', arguments: { path: 'a.md' }, result: '# A', isError: false, error: null, durationMs: 12 }]
          : [],
      // The first visit was answered by a fallback model.
      models: n === 1 ? ['ollama/llama3.2'] : ['openai/gpt-4o-mini'],
    });
    const runVisits = vi.fn((_runId: string) =>
      Promise.resolve({
        visits: [visit(1, 'first ticket', 'first summary', first), visit(2, 'second ticket', 'second summary', second)],
        cost: { total: both, nodes: { summary: both }, calls: [] },
      }),
    );
    const savePins = vi.fn((_path: string, _pins: Record<string, unknown>) => Promise.resolve(null));
    const session = await mount(
      fakeApi({
        runVisits,
        savePins,
        openRun: () =>
          Promise.resolve(stored({
            summary: pastRun('loop-run'),
            flow: offlineFlow(),
            input: 'x',
            result: 'done',
            error: null,
            waiting: null,
            events: [],
            outputs: [],
            cost: NO_COST,
          })),
      }),
    );
    await act(() => session.openRun('loop-run'));
    expect(runVisits).toHaveBeenCalledWith('loop-run');
    // The node says what its calls cost, over both visits.
    expect(screen.getByTestId('cost-summary').textContent).toBe('$0.003000');
    act(() => session.selectInView('summary'));
    await act(async () => fireEvent.click(screen.getByTestId('tab-inspector')));
    const picker = screen.getByTestId('visit-picker') as HTMLSelectElement;
    expect([...picker.options].map((option) => option.textContent)).toEqual(['visit 1', 'visit 2']);
    // The latest visit first; the first one when picked.
    expect(screen.getByTestId('visit-output').textContent).toBe('second summary');
    fireEvent.change(picker, { target: { value: '0' } });
    expect(screen.getByTestId('visit-input').textContent).toBe('first ticket');
    expect(screen.getByTestId('visit-output').textContent).toBe('first summary');
    expect(screen.getByTestId('visit-facts').textContent).toBe(
      'completed · 1.50 s · 1 LLM call · tokens 10/1 · cost $0.001000 · answered by ollama/llama3.2',
    );
    // Its MCP tool calls, with their arguments, time and result.
    expect(screen.getByTestId('visit-tool-calls').textContent).toBe('files/read_text_file {"path":"a.md"} · 12 ms · # A');
    await act(async () => fireEvent.click(screen.getByTestId('pin-visit')));
    expect(savePins).toHaveBeenLastCalledWith('/flows/offline.json', { summary: 'first summary' });

    // A live run: its visits and costs are read again as its steps end.
    act(() => session.backToEditing());
    let emit: (event: RunEvent) => void = () => {};
    const startRun = vi.fn((_request: unknown, onEvent: (event: RunEvent) => void) => {
      emit = onEvent;
      return Promise.resolve('live-run');
    });
    runVisits.mockClear();
    act(() => {
      session.api.startRun = startRun;
      // With a budget, the toolbar says what the run spent of it.
      session.canvas.setFlowSetting('budget', { maxCostUsd: 0.002, maxTokens: 100 });
    });
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    await act(async () => {
      emit(event(1, 'run_start', null, 'x', { runId: 'live-run' }));
      emit(event(2, 'step_start', 'summary', 'Summarize', { runId: 'live-run' }));
      emit(event(3, 'step_end', 'summary', 'done', { runId: 'live-run' }));
      await new Promise((resolve) => setTimeout(resolve, 300));
    });
    // Once for the burst of events, not once each.
    expect(runVisits.mock.calls).toEqual([['live-run']]);
    expect(screen.getByTestId('cost-summary').textContent).toBe('$0.003000');
    const spent = screen.getByTestId('run-spent');
    expect(spent.textContent).toBe('$0.003000 of $0.002000 · 25 of 100 tokens');
    expect(spent.classList.contains('over')).toBe(true);
  });

  it('saves price overrides in Settings, and shows the engine’s refusal of a wrong table', async () => {
    const view = (prices: string): SettingsView => ({
      providers: [],
      defaultModel: '',
      userName: '',
      prices,
      mcpServers: '',
      people: '',
      variables: [],
      servers: [],
      settingsFile: '/config/settings.json',
      runStore: '/data/runs.db',
    });
    const saveSettings = vi.fn((change: { prices: string | null }) =>
      change.prices?.includes('-1')
        ? Promise.reject({ code: 'badRequest', message: 'prices in Settings → Prices: `openai/x`: `input` must be a number of US dollars per million tokens, 0 or more' })
        : Promise.resolve(view(change.prices ?? '')),
    );
    await mount(fakeApi({ getSettings: () => Promise.resolve(view('')), saveSettings }));
    await act(async () => fireEvent.click(screen.getByTestId('tab-settings')));
    const prices = await screen.findByTestId('settings-prices');
    fireEvent.change(prices, { target: { value: '{"openai/x": {"input": -1, "output": 1}}' } });
    await act(async () => fireEvent.click(screen.getByTestId('settings-save-prices')));
    expect(screen.getByTestId('settings-prices-error').textContent).toContain('`openai/x`: `input`');
    fireEvent.change(prices, { target: { value: '{"openai/x": {"input": 1, "output": 1}}' } });
    await act(async () => fireEvent.click(screen.getByTestId('settings-save-prices')));
    expect(saveSettings).toHaveBeenLastCalledWith(expect.objectContaining({ prices: '{"openai/x": {"input": 1, "output": 1}}', defaultModel: null }));
    expect(screen.queryByTestId('settings-prices-error')).toBeNull();
  });

  it('adds a server in Settings → Servers without showing its token back, and says what its connection check found', async () => {
    let servers: SettingsView['servers'] = [];
    const view = (): SettingsView => ({ ...settingsView(), servers });
    const saveSettings = vi.fn((change: SettingsChange) => {
      const server = change.server;
      if (server && !(server.url ?? '').startsWith('http')) {
        return Promise.reject({ code: 'badRequest', message: '`team.example`: a server’s address starts with http:// or https://' });
      }
      if (server) servers = server.remove ? [] : [{ name: server.name, url: server.url ?? '', tokenSet: (server.token ?? '') !== '' }];
      return Promise.resolve(view());
    });
    const checkServer = vi.fn(() => Promise.resolve({ ok: false, message: 'http://127.0.0.1:8420 refuses the token (401): it must be one of the server’s tokens file' }));
    await mount(fakeApi({ getSettings: () => Promise.resolve(view()), saveSettings, checkServer }));
    await act(async () => fireEvent.click(screen.getByTestId('tab-settings')));
    fireEvent.change(await screen.findByTestId('settings-server-name'), { target: { value: 'team' } });
    fireEvent.change(screen.getByTestId('settings-server-url'), { target: { value: 'team.example' } });
    fireEvent.change(screen.getByTestId('settings-server-token'), { target: { value: 'secret-token-0123456789' } });
    await act(async () => fireEvent.click(screen.getByTestId('settings-save-server')));
    expect(screen.getByTestId('settings-server-error').textContent).toContain('starts with http://');
    fireEvent.change(screen.getByTestId('settings-server-url'), { target: { value: 'http://127.0.0.1:8420' } });
    await act(async () => fireEvent.click(screen.getByTestId('settings-save-server')));
    expect(saveSettings).toHaveBeenLastCalledWith(
      expect.objectContaining({ server: { name: 'team', url: 'http://127.0.0.1:8420', token: 'secret-token-0123456789', remove: false } }),
    );
    const row = screen.getByTestId('settings-server');
    expect(row.textContent).toContain('token set');
    expect(document.body.textContent).not.toContain('secret-token-0123456789');
    expect((screen.getByTestId('settings-server-token') as HTMLInputElement).value).toBe('');
    await act(async () => fireEvent.click(within(row).getByTestId('settings-check-server')));
    expect(checkServer).toHaveBeenCalledWith('team');
    const found = within(row).getByTestId('settings-server-check');
    expect(found.dataset.ok).toBe('false');
    expect(found.textContent).toContain('refuses the token (401)');
  });

  it('lists the flow’s test cases, runs them showing each failing assertion, and saves a past run as a case', async () => {
    const tests: TestsView = {
      testsFile: '/flows/offline.tests.json',
      exists: true,
      problem: null,
      cases: [
        { name: 'approved', origin: 'offline.tests.json:3', assertions: ['status is completed'], recorded: true },
        { name: 'rejected', origin: 'offline.tests.json:9', assertions: ['result contains "receipt"'], recorded: false },
      ],
    };
    const report = (name: string, passed: boolean): CaseReport => ({
      name,
      origin: 'offline.tests.json:3',
      passRate: 1,
      passedRuns: passed ? 1 : 0,
      passed,
      runs: [
        {
          runId: `run-${name}`,
          status: 'completed',
          error: null,
          passed,
          durationMs: 12,
          offline: true,
          recorded: false,
          assertions: passed
            ? [{ assertion: 'status is completed', passed: true, expected: 'completed', actual: 'completed' }]
            : [{ assertion: 'result contains "receipt"', passed: false, expected: 'something containing "receipt"', actual: '"Declined."' }],
        },
      ],
    });
    const runTests = vi.fn((_request: unknown, onCase: (report: CaseReport) => void) => {
      onCase(report('rejected', false));
      onCase(report('approved', true));
      return Promise.resolve({ flow: '/flows/offline.json', testsFile: tests.testsFile, cases: [], durationMs: 20 });
    });
    const openRun = vi.fn((runId: string) =>
      Promise.resolve(
        stored({
          summary: { ...pastRun(runId), flowPath: '/flows/offline.json' },
          flow: offlineFlow(),
          input: 'x',
          result: 'done',
          error: null,
          waiting: null,
          events: [],
          outputs: [],
          cost: NO_COST,
        }),
      ),
    );
    const spec: CaseSpec = { name: 'Refund desk run-reje', input: 'x', expect: [{ status: 'completed' }] };
    const caseFromRun = vi.fn((_runId: string) => Promise.resolve(spec));
    const saveTestCase = vi.fn((_flow: unknown, _path: string, _spec: CaseSpec, _fromRun: string | null) =>
      Promise.resolve({ ...tests, cases: [...tests.cases, { name: spec.name, origin: 'offline.tests.json:15', assertions: [], recorded: true }] }),
    );
    const session = await mount(fakeApi({ readTests: () => Promise.resolve(tests), runTests, openRun, caseFromRun, saveTestCase }));
    await act(async () => fireEvent.click(screen.getByTestId('tab-tests')));
    const rows = screen.getAllByTestId('test-case');
    expect(rows.map((row) => row.dataset.case)).toEqual(['approved', 'rejected']);
    expect(rows.map((row) => row.dataset.state)).toEqual(['not-run', 'not-run']);

    await act(async () => fireEvent.click(screen.getByTestId('tests-run-all')));
    expect(runTests.mock.calls[0][0]).toMatchObject({ path: '/flows/offline.json', case: null, record: false });
    expect(screen.getAllByTestId('test-case').map((row) => row.dataset.state)).toEqual(['passed', 'failed']);
    expect(screen.getByTestId('tests-summary').textContent).toBe('1 passed, 1 failed');
    expect(screen.getByTestId('test-failures').textContent).toBe(
      'result contains "receipt": expected something containing "receipt", got "Declined."',
    );

    // The failing case's run opens on the canvas.
    const failed = screen.getAllByTestId('test-case')[1];
    await act(async () => fireEvent.click(within(failed).getByTestId('test-open-run')));
    expect(openRun).toHaveBeenCalledWith('run-rejected', null);
    expect(session.getSnapshot().viewing?.run.summary.id).toBe('run-rejected');

    // That run becomes a new case: edited as JSON, refused when it is not, saved with its answers.
    await act(async () => fireEvent.click(screen.getByTestId('tab-history')));
    await act(async () => fireEvent.click(screen.getByTestId('history-save-case')));
    expect(caseFromRun).toHaveBeenCalledWith('run-rejected');
    const text = screen.getByTestId('test-draft-text') as HTMLTextAreaElement;
    expect(JSON.parse(text.value)).toEqual(spec);
    fireEvent.change(text, { target: { value: '{"name": "broken"' } });
    await act(async () => fireEvent.click(screen.getByTestId('test-draft-save')));
    expect(screen.getByTestId('test-draft-problem').textContent).toContain('Not JSON');
    expect(saveTestCase).not.toHaveBeenCalled();
    fireEvent.change(text, { target: { value: JSON.stringify({ ...spec, name: 'refund declined' }) } });
    await act(async () => fireEvent.click(screen.getByTestId('test-draft-save')));
    const [, path, saved, fromRun] = saveTestCase.mock.calls[0];
    expect([path, saved.name, fromRun]).toEqual(['/flows/offline.json', 'refund declined', 'run-rejected']);
    expect(screen.getByTestId('test-draft-saved').textContent).toContain('/flows/offline.tests.json');
  });

  it('lists approvals across runs in the inbox, decides one with its form, and asks the shown run’s in the side panel', async () => {
    const RUN = '6c4ba313-67fb-4e7c-bbc7-63ab45649f30';
    const other: PendingApproval = {
      runId: 'other-run',
      flow: 'review',
      flowName: 'Refund review',
      flowPath: '/flows/review.json',
      since: '2026-11-21T20:56:18.000Z',
      nodeId: 'review',
      message: 'Send the note?',
      input: 'the note',
      deadline: '2026-11-22T20:56:18.000Z',
      fields: [
        { name: 'tone', type: 'choice', options: ['warm', 'formal'] },
        { name: 'amount', type: 'number', required: true },
      ],
    };
    const shown: PendingApproval = {
      runId: RUN,
      flow: 'offline',
      flowName: 'Refund desk (offline)',
      flowPath: '/flows/offline.json',
      since: '2026-11-21T20:56:18.000Z',
      nodeId: 'review',
      message: 'Approve the refund?',
      input: 'Dear Ada',
      fields: [{ name: 'reply', type: 'draft' }],
    };
    let pending = [other];
    const resumeRun = vi.fn((_runId: string, _decision: Decision, _onEvent: (event: RunEvent) => void) => Promise.resolve({ runId: 'other-run', approval: null }));
    const startRun = vi.fn((_request: unknown, onEvent: (event: RunEvent) => void) => {
      pending = [other, shown];
      offlineEventsToPause().forEach(onEvent);
      return Promise.resolve(RUN);
    });
    const session = await mount(fakeApi({ pendingApprovals: () => Promise.resolve({ approvals: pending, problems: [] }), resumeRun, startRun }));
    expect(screen.getByTestId('inbox-count').textContent).toBe('1');
    await act(async () => fireEvent.click(screen.getByTestId('tab-inbox')));
    const item = screen.getByTestId('inbox-item');
    expect(item.dataset.runId).toBe('other-run');
    expect(within(item).getByTestId('inbox-approval-message').textContent).toBe('Send the note?');
    expect(within(item).getByTestId('inbox-approval-deadline').textContent).toMatch(/^times out at /);
    // A required answer is asked for before anything is sent.
    fireEvent.click(within(item).getByTestId('inbox-approve'));
    expect(within(item).getByTestId('inbox-approval-problem').textContent).toContain('“amount” needs an answer');
    expect(resumeRun).not.toHaveBeenCalled();
    fireEvent.change(within(item).getByTestId('inbox-approval-field-tone'), { target: { value: 'warm' } });
    fireEvent.change(within(item).getByTestId('inbox-approval-field-amount'), { target: { value: '40' } });
    pending = [];
    await act(async () => fireEvent.click(within(item).getByTestId('inbox-approve')));
    expect(resumeRun.mock.calls[0].slice(0, 2)).toEqual(['other-run', { decision: 'approve', note: '', fields: { tone: 'warm', amount: 40 } }]);
    expect(screen.queryByTestId('inbox-item')).toBeNull();

    // The run shown pauses: its prompt is in the side panel too, its draft ready to edit.
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    await act(() => session.refreshInbox());
    const card = screen.getByTestId('paused-card');
    expect(within(card).getByTestId('panel-approval-message').textContent).toContain('Approve the refund?');
    const draft = within(card).getByTestId('panel-approval-field-reply') as HTMLTextAreaElement;
    expect(draft.value).toBe('Dear Ada');
    fireEvent.change(draft, { target: { value: 'Dear Ada, it is on its way.' } });
    resumeRun.mockImplementation((_runId, _decision, onEvent) => {
      offlineEventsAfterApprove().forEach(onEvent);
      return Promise.resolve({ runId: RUN, approval: null });
    });
    await act(async () => fireEvent.click(within(card).getByTestId('panel-approve')));
    expect(resumeRun.mock.calls[1].slice(0, 2)).toEqual([RUN, { decision: 'approve', note: '', fields: { reply: 'Dear Ada, it is on its way.' } }]);
    expect(screen.queryByTestId('paused-card')).toBeNull();
  });

  it('keeps the layout the person leaves: collapsed and resized panels, the log opening with a run, the theme', async () => {
    const stored = new Map<string, string>();
    const storage = { getItem: (key: string) => stored.get(key) ?? null, setItem: (key: string, value: string) => void stored.set(key, value) };
    const layout = new LayoutStore(storage);
    const startRun = vi.fn((_request: unknown, onEvent: (event: RunEvent) => void) => {
      onEvent(event(1, 'run_start', null, 'x'));
      return Promise.resolve('run-1');
    });
    const session = new Session(fakeApi({ startRun, getSettings: () => Promise.resolve(settingsView()) }), {
      canvas: new CanvasStore(offlineFlow(), '/flows/offline.json'),
      run: new RunStore((flush) => flush()),
      layout,
    });
    await act(() => session.init());
    render(<App session={session} />);
    // The log takes no room until a run starts.
    expect(screen.getByTestId('log').dataset.collapsed).toBe('true');
    expect(screen.queryByTestId('log-row')).toBeNull();
    await act(async () => fireEvent.click(screen.getByTestId('run')));
    expect(screen.getByTestId('log').dataset.collapsed).toBe('false');
    expect(screen.getAllByTestId('log-row').length).toBeGreaterThan(0);

    fireEvent.click(screen.getByTestId('palette-collapse'));
    expect(screen.queryByTestId('palette')).toBeNull();
    fireEvent.click(screen.getByTestId('side-collapse'));
    expect(screen.queryByTestId('side-panel')).toBeNull();
    expect(JSON.parse(stored.get('weft.layout') ?? '{}')).toMatchObject({ paletteCollapsed: true, sideCollapsed: true });
    fireEvent.click(screen.getByTestId('side-expand'));
    fireEvent.click(screen.getByTestId('palette-expand'));
    expect(screen.getByTestId('palette')).toBeTruthy();

    // A drag on the side panel's handle widens it, within its limits.
    const handle = screen.getByTestId('side-splitter');
    fireEvent.pointerDown(handle, { button: 0, clientX: 900 });
    fireEvent.pointerMove(window, { clientX: 800 });
    fireEvent.pointerUp(window);
    expect(layout.getSnapshot().sideWidth).toBe(DEFAULT_LAYOUT.sideWidth + 100);
    fireEvent.pointerDown(handle, { button: 0, clientX: 900 });
    fireEvent.pointerMove(window, { clientX: 0 });
    fireEvent.pointerUp(window);
    expect(layout.getSnapshot().sideWidth).toBe(LIMITS.sideWidth.max);

    // A new start opens as it was left (but with the log collapsed again).
    const again = new LayoutStore(storage).getSnapshot();
    expect(again).toMatchObject({ sideWidth: LIMITS.sideWidth.max, paletteCollapsed: false, logCollapsed: true });

    await act(async () => fireEvent.click(screen.getByTestId('tab-settings')));
    fireEvent.change(await screen.findByTestId('settings-theme'), { target: { value: 'dark' } });
    expect(document.querySelector('.app')?.getAttribute('data-theme')).toBe('dark');
  });

  it('lists the MCP servers’ tools and picks an agent’s tools and those it asks approval for', async () => {
    const listMcpTools = vi.fn(() =>
      Promise.resolve([
        {
          name: 'files',
          transport: 'stdio',
          fromSettings: false,
          tools: [
            { name: 'read_file', description: 'Reads a file', inputSchema: {} },
            { name: 'write_file', description: 'Writes a file', inputSchema: {} },
          ],
          error: null,
        },
        { name: 'tracker', transport: 'http', fromSettings: true, tools: [], error: 'MCP server `tracker`: TRACKER_TOKEN is not set' },
      ]),
    );
    const session = await mount(fakeApi({ listMcpTools }));
    // The flow panel: servers typed as JSON are one undoable edit of the flow's settings.
    const servers = screen.getByTestId('flow-mcp-servers');
    fireEvent.change(servers, { target: { value: '{"files": {"command": "mcp-files"' } });
    expect(screen.getByTestId('flow-mcp-syntax').textContent).toContain('Not JSON yet');
    expect(session.canvas.getSnapshot().flow.settings?.mcpServers).toBeUndefined();
    fireEvent.change(servers, { target: { value: '{"files": {"command": "mcp-files"}}' } });
    expect(session.canvas.getSnapshot().flow.settings?.mcpServers).toEqual({ files: { command: 'mcp-files' } });
    await act(async () => fireEvent.click(screen.getByTestId('flow-mcp-test')));
    const listed = within(screen.getByTestId('flow-mcp-tools'));
    expect(listed.getAllByTestId('mcp-tool').map((tool) => tool.textContent)).toEqual(['read_file Reads a file', 'write_file Writes a file']);
    expect(listed.getByTestId('mcp-server-error').textContent).toContain('TRACKER_TOKEN is not set');

    const agent = { id: '' };
    act(() => {
      agent.id = session.canvas.addNode('agent', { label: 'Reader', model: 'gpt-4o-mini' }, { x: 0, y: 0 });
    });
    const picker = within(screen.getByTestId('field-tools.mcp'));
    const box = (entry: string) => picker.getAllByTestId('mcp-pick').find((input) => input.dataset.entry === entry) as HTMLInputElement;
    fireEvent.click(box('files/read_file'));
    const tools = () => (session.canvas.getSnapshot().flow.nodes.find((node) => node.id === agent.id)!.data as { tools?: { mcp?: string[] } }).tools?.mcp;
    expect(tools()).toEqual(['files/read_file']);
    // "All its tools" stands for the single ones, which it replaces.
    fireEvent.click(box('files'));
    expect(tools()).toEqual(['files']);
    expect(box('files/write_file').checked).toBe(true);
    expect(box('files/write_file').disabled).toBe(true);
    // An unreachable server's entry can still be typed, and is kept as a removable row.
    fireEvent.change(screen.getByTestId('field-tools.mcp-typed'), { target: { value: 'tracker/create_issue' } });
    fireEvent.keyDown(screen.getByTestId('field-tools.mcp-typed'), { key: 'Enter' });
    expect(tools()).toEqual(['files', 'tracker/create_issue']);
    expect(picker.getByTestId('mcp-entry').textContent).toContain('tracker/create_issue');

    const approvals = within(screen.getByTestId('field-approveTools'));
    fireEvent.click(approvals.getAllByTestId('mcp-pick').find((input) => input.dataset.entry === 'files/*')!);
    expect(session.canvas.getSnapshot().flow.nodes.find((node) => node.id === agent.id)!.data?.approveTools).toEqual(['files/*']);
    // Listed once for the whole session, not per field.
    expect(listMcpTools).toHaveBeenCalledTimes(1);
    // The breakpoint "stop before tool calls" is offered on agents.
    expect(within(screen.getByTestId('breakpoint-when')).getByText('stop before tool calls')).toBeTruthy();
    session.canvas.undo();
    expect(tools()).toEqual(['files', 'tracker/create_issue']);
  });

  it('tidies the flow up as one undoable step, in the direction chosen (remembered), also with Shift+T', async () => {
    const stored = new Map<string, string>();
    const storage = { getItem: (key: string) => stored.get(key) ?? null, setItem: (key: string, value: string) => void stored.set(key, value) };
    const session = new Session(fakeApi(), {
      canvas: new CanvasStore(offlineFlow(), '/flows/offline.json'),
      run: new RunStore((flush) => flush()),
      layout: new LayoutStore(storage),
    });
    await act(() => session.init());
    render(<App session={session} />);
    const placed = () => Object.fromEntries(session.canvas.getSnapshot().flow.nodes.map((node) => [node.id, node.position]));
    const before = placed();
    const edges = session.canvas.getSnapshot().flow.edges;

    fireEvent.click(screen.getByTestId('tidy-up'));
    const across = placed();
    expect(across).not.toEqual(before);
    for (const edge of edges) expect(Number(across[edge.target]?.x), `${edge.source}→${edge.target}`).toBeGreaterThan(Number(across[edge.source]?.x));
    expect(screen.getByTestId('title').dataset.dirty).toBe('true');

    fireEvent.change(screen.getByTestId('tidy-direction'), { target: { value: 'down' } });
    expect(JSON.parse(stored.get('weft.layout') ?? '{}')).toMatchObject({ tidyDirection: 'down' });
    fireEvent.keyDown(window, { key: 'T', shiftKey: true });
    const downwards = placed();
    for (const edge of edges) expect(Number(downwards[edge.target]?.y), `${edge.source}→${edge.target}`).toBeGreaterThan(Number(downwards[edge.source]?.y));

    // Each tidy-up is one step back.
    fireEvent.click(screen.getByTestId('undo'));
    expect(placed()).toEqual(across);
    fireEvent.click(screen.getByTestId('undo'));
    expect(placed()).toEqual(before);
    expect(screen.getByTestId('title').dataset.dirty).toBe('false');
  });

  it('shows when each schedule comes next on the start node, and runs one now with its input', async () => {
    const upcomingSchedules = vi.fn((flow: CanvasFlow | { settings?: Record<string, Value> }) =>
      Promise.resolve(
        Array.isArray(flow.settings?.schedules)
          ? [
              {
                flow: 'Refund desk (offline)',
                schedule: 0,
                cron: '0 9 * * 1-5',
                timezone: 'Europe/Paris',
                description: 'At 09:00 on Monday through Friday',
                next: ['2099-11-30T09:00:00+01:00', '2099-12-01T09:00:00+01:00', '2099-12-02T09:00:00+01:00'],
                input: '{"amount":40,"customer":"Grace"}',
              },
            ]
          : [],
      ),
    );
    const startRun = vi.fn((_request, onEvent: (event: RunEvent) => void) => {
      offlineEventsToPause().forEach(onEvent);
      return Promise.resolve('6c4ba313-67fb-4e7c-bbc7-63ab45649f30');
    });
    const session = await mount(fakeApi({ upcomingSchedules, startRun }));
    // Without schedules the start node shows none (and nothing is asked).
    expect(screen.queryByTestId('schedules-start')).toBeNull();
    expect(upcomingSchedules).not.toHaveBeenCalled();

    await act(async () => {
      session.canvas.setFlowSetting('schedules', [
        { cron: '0 9 * * 1-5', timezone: 'Europe/Paris', input: { amount: 40, customer: 'Grace' } },
      ]);
      await session.validateNow();
    });
    const next = within(screen.getByTestId('node-start')).getByTestId('schedule-next-0');
    expect(next.textContent).toBe('Next Mon 30 Nov 09:00 Europe/Paris');
    expect(screen.getByTestId('schedule-0').title).toContain('At 09:00 on Monday through Friday');

    await act(async () => fireEvent.click(screen.getByTestId('run-now-0')));
    expect(startRun).toHaveBeenCalledTimes(1);
    expect(startRun.mock.calls[0][0]).toMatchObject({ input: '{"amount":40,"customer":"Grace"}' });
    expect(screen.getByTestId('run-status').textContent).toBe('paused');

    // Schedules taken out of the flow: the start node says nothing of them any more.
    await act(async () => {
      session.canvas.setFlowSetting('schedules', undefined);
      await session.validateNow();
    });
    expect(screen.queryByTestId('schedules-start')).toBeNull();
  });

  it('filters the palette as you type and adds the first match with Enter', async () => {
    const session = await mount(fakeApi());
    const search = screen.getByTestId('palette-search');
    fireEvent.change(search, { target: { value: 'appr' } });
    expect(screen.queryByTestId('palette-agent')).toBeNull();
    expect(screen.getByTestId('palette-approval')).toBeTruthy();
    fireEvent.change(search, { target: { value: 'zzz' } });
    expect(screen.getByTestId('palette-none')).toBeTruthy();
    fireEvent.change(search, { target: { value: 'pauses' } });
    fireEvent.keyDown(search, { key: 'Enter' });
    const added = session.canvas.getSnapshot().flow.nodes.at(-1)!;
    expect(added.type).toBe('approval');
    expect((search as HTMLInputElement).value).toBe('');
  });

  it('opens a flow file dropped on the window or chosen in the system dialog, asking first about unsaved changes', async () => {
    let drop: (paths: string[]) => void = () => {};
    const openFlow = vi.fn((path: string) => Promise.resolve({ path, flow: offlineFlow() }));
    const session = await mount(
      fakeApi({
        openFlow,
        onFileDrop: (listener) => {
          drop = listener;
          return Promise.resolve(() => {});
        },
        pickFile: (mode) => Promise.resolve(mode === 'open' ? '/picked/chosen.json' : null),
      }),
    );
    await act(async () => drop(['/dropped/triage.json']));
    expect(openFlow).toHaveBeenLastCalledWith('/dropped/triage.json');
    await act(async () => drop(['/dropped/notes.txt']));
    expect(screen.getByTestId('error-banner').textContent).toContain('Drop a flow file (.json)');
    // Unsaved changes: asked first.
    act(() => session.canvas.setFlowName('edited'));
    await act(async () => drop(['/dropped/other.json']));
    expect(openFlow).toHaveBeenCalledTimes(1);
    await act(async () => fireEvent.click(screen.getByTestId('discard-confirm')));
    expect(openFlow).toHaveBeenLastCalledWith('/dropped/other.json');
    // Open… → Browse… uses the system's dialog.
    await act(async () => fireEvent.click(screen.getByTestId('file-open')));
    await act(async () => fireEvent.click(screen.getByTestId('path-browse')));
    expect(openFlow).toHaveBeenLastCalledWith('/picked/chosen.json');
    expect(screen.queryByTestId('path-dialog')).toBeNull();
  });

  it('lists the file’s versions and marks on the canvas what changed since one, which Restore brings back', async () => {
    const older = `aa11${'0'.repeat(60)}`;
    const newer = `bb22${'0'.repeat(60)}`;
    const version = (hash: string, current: boolean, lastAt: string): FileVersion => ({
      hash,
      firstAt: lastAt,
      lastAt,
      runs: current ? ['run-2'] : ['run-0', 'run-1'],
      subflowRuns: [],
      saves: current ? [{ at: lastAt, by: 'ana', kind: 'save' }] : [],
      current,
    });
    const flowVersions = vi.fn((path: string) =>
      Promise.resolve({ path, current: newer, versions: [version(newer, true, '2026-11-28T02:00:00Z'), version(older, false, '2026-11-27T02:00:00Z')] }),
    );
    // The older version: `summary` had another template, `extra` was there, `auto` was not.
    const other = offlineFlow();
    other.nodes = other.nodes
      .filter((node) => node.id !== 'auto')
      .map((node) => (node.id === 'summary' ? { ...node, data: { ...node.data, template: 'Old {{ input }}' } } : node));
    other.nodes.push({ id: 'extra', type: 'template', position: { x: 900, y: 40 }, data: { label: 'Extra', template: 'x' } });
    const diff: FlowDiff = {
      flow: [],
      settings: [],
      nodesAdded: [{ id: 'auto', type: 'template', label: 'auto' }],
      nodesRemoved: [{ id: 'extra', type: 'template', label: 'Extra' }],
      nodesChanged: [
        {
          node: { id: 'summary', type: 'template', label: 'Summarize' },
          fields: [{ field: 'template', a: 'Old {{ input }}', b: 'Now {{ input }}' }],
        },
      ],
      nodesMoved: [],
      edgesAdded: [],
      edgesRemoved: [],
    };
    const compareFlow = vi.fn((_flow: Flow, _path: string | null, against: string) =>
      Promise.resolve({ against: other, label: `flow version ${against.slice(0, 12)}`, diff }),
    );
    const diffFlows = vi.fn((_a: Flow, _b: Flow) => Promise.resolve(diff));
    const session = await mount(fakeApi({ flowVersions, compareFlow, diffFlows }));
    await act(async () => fireEvent.click(screen.getByTestId('tab-history')));
    await act(async () => fireEvent.click(screen.getByTestId('history-versions')));
    expect(flowVersions).toHaveBeenCalledWith('/flows/offline.json');
    const rows = screen.getAllByTestId('version-row');
    expect(rows.map((row) => row.getAttribute('data-hash'))).toEqual([newer, older]);
    expect(rows[0].textContent).toContain('file now');
    expect(rows[0].textContent).toContain('1 run · saved by ana');
    expect(rows[1].textContent).toContain('2 runs');

    await act(async () => fireEvent.click(within(rows[1]).getByTestId('version-compare')));
    expect(compareFlow).toHaveBeenCalledWith(session.canvas.getSnapshot().flow, '/flows/offline.json', older);
    expect(screen.getByTestId('flow-compare-banner').textContent).toContain('Compared with flow version aa1100000000');
    expect(screen.getByTestId('flow-compare-counts').textContent).toBe('1 added · 1 removed · 1 changed');
    expect(screen.getByTestId('diff-auto').textContent).toBe('added');
    expect(screen.getByTestId('diff-summary').textContent).toBe('changed');
    expect(screen.queryByTestId('diff-large')).toBeNull();
    expect(screen.getByTestId('ghost-extra').textContent).toContain('removed');

    // The inspector of a changed node lists what changed.
    act(() => session.canvas.select(['summary'], []));
    await act(async () => fireEvent.click(screen.getByTestId('tab-inspector')));
    const field = screen.getByTestId('compared-field');
    expect(field.getAttribute('data-field')).toBe('template');
    expect(field.textContent).toBe('template: Old {{ input }} → Now {{ input }}');

    // An edit asks for the comparison again, with the edited flow, against the version the
    // canvas already has (nothing is read from the store again).
    act(() => session.canvas.setNodeField('large', 'label', 'Big'));
    await act(() => session.validateNow());
    expect(compareFlow).toHaveBeenCalledTimes(1);
    expect(diffFlows).toHaveBeenCalledTimes(1);
    expect(diffFlows.mock.calls[0][0]).toEqual(other);
    expect(diffFlows.mock.calls[0][1]).toBe(session.canvas.getSnapshot().flow);

    // Restore asks first, then puts the version on the canvas as one undoable edit.
    await act(async () => fireEvent.click(screen.getByTestId('flow-compare-restore')));
    await act(async () => fireEvent.click(screen.getByTestId('restore-cancel')));
    expect(session.canvas.getSnapshot().flow.nodes.some((node) => node.id === 'extra')).toBe(false);
    await act(async () => fireEvent.click(screen.getByTestId('flow-compare-restore')));
    await act(async () => fireEvent.click(screen.getByTestId('restore-confirm')));
    const restored = session.canvas.getSnapshot();
    expect(restored.flow.nodes.map((node) => node.id)).toEqual(other.nodes.map((node) => node.id));
    expect(restored.dirty).toBe(true);
    expect(screen.queryByTestId('flow-compare-banner')).toBeNull();
    expect(screen.queryByTestId('ghost-extra')).toBeNull();
    act(() => session.canvas.undo());
    expect(session.canvas.getSnapshot().flow.nodes.some((node) => node.id === 'auto')).toBe(true);

    // A save is a version of its own: the list is read again.
    await act(() => session.save());
    expect(flowVersions).toHaveBeenCalledTimes(2);
  });

  it('shows a failing command’s message in the error banner', async () => {
    const session = await mount(fakeApi({ openFlow: () => Promise.reject({ code: 'flowFile', message: 'cannot read /nope.json' }) }));
    await act(() => session.open('/nope.json'));
    expect(screen.getByTestId('error-banner').textContent).toContain('cannot read /nope.json');
  });
});
