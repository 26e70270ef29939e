// The edited flow's test cases (NAME.tests.json beside its file): run one or all, see each
// failing assertion with what was expected and what came, and open a case's run on the canvas.
// Cases are written by hand, or from a past run (History → Save as test case).

import { useEffect, useState } from 'react';
import type { CaseReport, TestCaseView } from '../bindings';
import { useCanvas, useSession, useSessionState } from '../hooks';

function millisText(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** Why a case failed, one line each (the run's error, then each failing assertion). */
function failureLines(report: CaseReport): string[] {
  const lines: string[] = [];
  report.runs.forEach((run, index) => {
    if (run.passed) return;
    const prefix = report.runs.length > 1 ? `run ${index + 1}: ` : '';
    if (run.error) lines.push(`${prefix}${run.status && run.status !== 'completed' ? `the run ${run.status}: ` : ''}${run.error}`);
    else if (run.status && run.status !== 'completed') lines.push(`${prefix}the run ${run.status}`);
    for (const outcome of run.assertions.filter((candidate) => !candidate.passed)) {
      lines.push(`${prefix}${outcome.assertion}: expected ${outcome.expected}, got ${outcome.actual}`);
    }
  });
  return lines;
}

function CaseRow({ testCase }: { testCase: TestCaseView }) {
  const session = useSession();
  const result = useSessionState((state) => state.testResults[testCase.name]);
  const running = useSessionState((state) => state.testsRunning);
  const report = result === 'running' ? undefined : result;
  const state = result === 'running' ? 'running' : report ? (report.passed ? 'passed' : 'failed') : 'not-run';
  const runId = report?.runs.find((run) => !run.passed)?.runId ?? report?.runs[0]?.runId ?? null;
  const blocked = session.openRunBlockedReason();
  const spent = report ? report.runs.reduce((sum, run) => sum + run.durationMs, 0) : 0;
  return (
    <li className={`test-case test-${state}`} data-testid="test-case" data-case={testCase.name} data-state={state}>
      <div className="test-case-head">
        <span className="test-mark">{state === 'passed' ? '✓' : state === 'failed' ? '✗' : state === 'running' ? '…' : '○'}</span>
        <span className="test-name">{testCase.name}</span>
        {testCase.recorded && (
          <span className="recorded-badge" title="Its LLM answers are recorded: it runs offline">
            recorded
          </span>
        )}
        <span className="muted test-origin">{testCase.origin}</span>
      </div>
      <div className="button-row">
        <button
          type="button"
          className="button small"
          data-testid="test-run-case"
          disabled={running}
          onClick={() => void session.runTests(testCase.name)}
        >
          Run
        </button>
        {runId && (
          <button
            type="button"
            className="button small"
            data-testid="test-open-run"
            disabled={blocked !== null}
            title={blocked ?? 'Show this case’s run on the canvas'}
            onClick={() => void session.openRun(runId)}
          >
            Open run
          </button>
        )}
        {report && (
          <span className="muted" data-testid="test-facts">
            {report.runs.length > 1 ? `${report.passedRuns}/${report.runs.length} runs passed · ` : ''}
            {millisText(spent)}
            {report.runs.every((run) => run.offline) ? ' · offline' : ''}
            {report.runs.some((run) => run.recorded) ? ' · recorded' : ''}
          </span>
        )}
      </div>
      {report && !report.passed && (
        <ul className="test-failures" data-testid="test-failures">
          {failureLines(report).map((line, index) => (
            <li key={index}>{line}</li>
          ))}
        </ul>
      )}
      {!report && (
        <ul className="test-assertions muted">
          {testCase.assertions.map((assertion, index) => (
            <li key={index}>{assertion}</li>
          ))}
        </ul>
      )}
    </li>
  );
}

export function TestsPanel() {
  const session = useSession();
  const path = useCanvas((state) => state.path);
  const tests = useSessionState((state) => state.tests);
  const running = useSessionState((state) => state.testsRunning);
  const results = useSessionState((state) => state.testResults);
  const [record, setRecord] = useState(false);

  // Read again when the tab opens and when another file is opened.
  useEffect(() => {
    void session.loadTests();
  }, [session, path]);

  if (!path) {
    return (
      <div className="tests muted" data-testid="tests">
        Save the flow first: its test cases live beside its file (NAME.tests.json).
      </div>
    );
  }
  const cases = tests?.cases ?? [];
  const reports = Object.values(results).filter((result): result is CaseReport => result !== 'running');
  const failed = reports.filter((report) => !report.passed).length;
  return (
    <div className="tests" data-testid="tests">
      <div className="history-toolbar">
        <button
          type="button"
          className="button small primary"
          data-testid="tests-run-all"
          disabled={running || cases.length === 0}
          onClick={() => void session.runTests(null, record)}
        >
          {running ? 'Running…' : 'Run all'}
        </button>
        <label className="muted" title="Ask the providers and keep their answers, so the cases run offline afterwards">
          <input type="checkbox" data-testid="tests-record" checked={record} onChange={(event) => setRecord(event.target.checked)} /> Record
        </label>
        {reports.length > 0 && (
          <span data-testid="tests-summary" className={failed > 0 ? 'status-failed' : 'status-completed'}>
            {reports.length - failed} passed{failed > 0 ? `, ${failed} failed` : ''}
          </span>
        )}
      </div>
      {tests?.problem && (
        <div className="field-error" data-testid="tests-problem">
          {tests.problem}
        </div>
      )}
      {tests && !tests.exists && (
        <p className="muted" data-testid="tests-none">
          No test cases yet. Open a past run in History and choose “Save as test case”, or write {tests.testsFile}.
        </p>
      )}
      <ul className="test-list">
        {cases.map((testCase) => (
          <CaseRow key={testCase.name} testCase={testCase} />
        ))}
      </ul>
    </div>
  );
}

/** A case written from the past run shown: its JSON to edit, then saved beside the flow. */
export function TestDraftEditor() {
  const session = useSession();
  const draft = useSessionState((state) => state.testDraft);
  if (!draft) return null;
  return (
    <section className="test-draft" data-testid="test-draft">
      <h3 className="section-title">New test case from run {draft.fromRun.slice(0, 8)}</h3>
      <p className="muted">
        Its input, decisions and what the run did, as expectations: edit them, then save. The run’s LLM answers become
        the case’s recording, so it runs offline.
      </p>
      <textarea
        className="input mono"
        data-testid="test-draft-text"
        rows={14}
        spellCheck={false}
        value={draft.text}
        onChange={(event) => session.editTestDraft(event.target.value)}
      />
      {draft.problem && (
        <div className="field-error" data-testid="test-draft-problem">
          {draft.problem}
        </div>
      )}
      {draft.savedTo && (
        <div className="muted" data-testid="test-draft-saved">
          Saved to {draft.savedTo}; the Tests tab runs it.
        </div>
      )}
      <div className="button-row">
        <button type="button" className="button small primary" data-testid="test-draft-save" onClick={() => void session.saveTestDraft()}>
          Save test case
        </button>
        <button type="button" className="button small" data-testid="test-draft-close" onClick={() => session.closeTestDraft()}>
          Close
        </button>
      </div>
    </section>
  );
}
