// The prompt drawn on the canvas at the node a paused run waits at: an approval's (the approval
// node itself, or the subflow node an approval inside a subflow belongs to), or a breakpoint's.

import { useState } from 'react';
import type { Continue } from '../bindings';
import { ApprovalForm } from '../components/ApprovalForm';
import { useRun, useSession, useSessionState } from '../hooks';

/**
 * At a breakpoint: the value there, and Continue, Step, or a JSON value to go on with instead
 * (checked here as JSON, then by the engine against the node's output schema).
 */
function BreakpointPrompt({ message }: { message: string }) {
  const session = useSession();
  const busy = useSessionState((state) => state.busy);
  const [replacement, setReplacement] = useState('');
  const [problem, setProblem] = useState<string | null>(null);

  const goOn = (step: boolean) => {
    let set: unknown = null;
    if (replacement.trim() !== '') {
      try {
        set = JSON.parse(replacement);
      } catch (error) {
        setProblem(`Not JSON: ${(error as Error).message}. A text goes in quotes: "like this".`);
        return;
      }
    }
    setProblem(null);
    void session.continueFromBreakpoint({ step, set: set as Continue['set'] }).then(() => setReplacement(''));
  };

  return (
    <div className="approval-prompt breakpoint-prompt nodrag nowheel" data-testid="breakpoint-prompt">
      <div className="approval-message" data-testid="breakpoint-message">
        {message}
      </div>
      <label className="approval-field">
        <span className="field-label">Another value (optional)</span>
        <textarea
          className="approval-note mono"
          data-testid="breakpoint-value"
          placeholder='JSON: "new text" or {"label": "bug"}'
          rows={3}
          value={replacement}
          onChange={(event) => setReplacement(event.target.value)}
        />
      </label>
      {problem && (
        <div className="field-error" data-testid="breakpoint-problem">
          {problem}
        </div>
      )}
      <div className="approval-buttons">
        <button type="button" className="button approve" data-testid="breakpoint-continue" disabled={busy} onClick={() => goOn(false)}>
          Continue
        </button>
        <button type="button" className="button" data-testid="breakpoint-step" disabled={busy} onClick={() => goOn(true)}>
          Step
        </button>
      </div>
    </div>
  );
}

/**
 * The approval the run shown waits for, answered here (the same form is in the side panel and
 * the inbox). Its form comes from the inbox's entry for the run; until that is read, the
 * message alone is asked.
 */
export function ApprovalPrompt({ nodeId }: { nodeId: string }) {
  const session = useSession();
  const waiting = useRun((view) => view.waiting);
  const runId = useRun((view) => view.runId);
  const busy = useSessionState((state) => state.busy);
  const pending = useSessionState((state) => state.inbox.find((approval) => approval.runId === runId) ?? null);
  if (!waiting) return null;
  if (waiting.breakpoint) return <BreakpointPrompt message={waiting.message} />;
  const nested = waiting.nodeId !== nodeId;
  const fields = pending?.fields ?? [];
  return (
    <div className="approval-prompt nodrag nowheel" data-testid="approval-prompt">
      <ApprovalForm
        key={`${runId}:${fields.length}`}
        message={waiting.message}
        fields={fields}
        input={pending?.input}
        deadline={pending?.deadline}
        where={nested ? waiting.nodeId : null}
        disabled={busy}
        refusal={pending?.refusal}
        onDecide={(approve, note, answers) => session.answerApproval(approve, note, answers)}
      />
    </div>
  );
}
