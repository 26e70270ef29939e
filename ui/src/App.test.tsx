// The canvas as a person uses it, against a fake backend: adding a node from the palette,
// validation problems blocking Run, and a run's events reaching the nodes and the log.

import { act, cleanup, fireEvent, render, screen, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { App } from './App';
import type { Api } from './api';
import type { Problem, RunEvent, RunResult } from './bindings';
import { CanvasStore } from './canvasStore';
import { RunStore } from './runStore';
import { Session } from './session';
import { catalog, offlineEventsAfterApprove, offlineEventsToPause, offlineFlow } from './test/fixtures';

function fakeApi(overrides: Partial<Api> = {}): Api {
  const fail = () => Promise.reject({ code: 'badRequest', message: 'not in this test' });
  return {
    describeKinds: () => Promise.resolve(catalog),
    openFlow: fail,
    saveFlow: (path) => Promise.resolve(path),
    recentFiles: () => Promise.resolve([]),
    startupFile: () => Promise.resolve(null),
    validateFlow: () => Promise.resolve([]),
    startRun: fail,
    resumeRun: fail,
    cancelRun: () => Promise.resolve(true),
    listRuns: () => Promise.resolve([]),
    openRun: fail,
    getSettings: fail,
    saveSettings: fail,
    testConnection: fail,
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

describe('App', () => {
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
    const problem = { severity: 'error', code: 'no-branch', nodeId: 'large', message: 'the if has no branch' } as Problem;
    await mount(fakeApi({ validateFlow: () => Promise.resolve([problem]) }));
    expect((screen.getByTestId('run') as HTMLButtonElement).disabled).toBe(true);
    expect(screen.getByTestId('run-blocked-reason').textContent).toBe('1 problem: node large: the if has no branch');
    expect(screen.getByTestId('node-large').dataset.invalid).toBe('true');
    fireEvent.click(screen.getByTestId('tab-problems'));
    const row = screen.getByTestId('problem');
    expect(row.dataset.code).toBe('no-branch');
    expect(row.dataset.nodeId).toBe('large');
  });

  it('shows a run pausing at the approval, and approving it on the canvas', async () => {
    const startRun = vi.fn((_request, onEvent: (event: RunEvent) => void) => {
      offlineEventsToPause().forEach(onEvent);
      return Promise.resolve({
        runId: '6c4ba313-67fb-4e7c-bbc7-63ab45649f30',
        status: 'paused',
        result: null,
        error: null,
        waiting: { nodeId: 'review', message: 'Ada asks for 120 EUR: parcel lost. Approve the refund?' },
      } as RunResult);
    });
    const resumeRun = vi.fn((_answer, onEvent: (event: RunEvent) => void) => {
      offlineEventsAfterApprove().forEach(onEvent);
      return Promise.resolve({ runId: '6c4ba313-67fb-4e7c-bbc7-63ab45649f30', status: 'completed', result: 'ok', error: null, waiting: null } as RunResult);
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
    expect(resumeRun.mock.calls[0][0]).toEqual({ runId: '6c4ba313-67fb-4e7c-bbc7-63ab45649f30', approve: true, note: 'fine' });
    expect(screen.getByTestId('run-status').textContent).toBe('completed');
    expect(screen.getByTestId('node-auto').dataset.status).toBe('skipped');
    expect(screen.getByTestId('node-refunded').dataset.status).toBe('done');
    expect(screen.getAllByTestId('log-row')).toHaveLength(18);
  });

  it('shows a failing command’s message in the error banner', async () => {
    const session = await mount(fakeApi({ openFlow: () => Promise.reject({ code: 'flowFile', message: 'cannot read /nope.json' }) }));
    await act(() => session.open('/nope.json'));
    expect(screen.getByTestId('error-banner').textContent).toContain('cannot read /nope.json');
  });
});
