// The prompt drawn on the canvas at the node a paused run waits at: an approval's (the approval
// node itself, or the subflow node an approval inside a subflow belongs to), or a breakpoint's.

import { useState } from 'react';
import type { Continue } from '../bindings';
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
      <textarea
        className="approval-note mono"
        data-testid="breakpoint-value"
        placeholder='Replace the value (JSON, optional): "new text" or {"label": "bug"}'
        rows={2}
        value={replacement}
        onChange={(event) => setReplacement(event.target.value)}
      />
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

export function ApprovalPrompt({ nodeId }: { nodeId: string }) {
  const session = useSession();
  const waiting = useRun((view) => view.waiting);
  const busy = useSessionState((state) => state.busy);
  const [note, setNote] = useState('');
  if (!waiting) return null;
  if (waiting.breakpoint) return <BreakpointPrompt message={waiting.message} />;
  const nested = waiting.nodeId !== nodeId;

  const answer = (approve: boolean) => {
    void session.answerApproval(approve, note).then(() => setNote(''));
  };

  return (
    <div className="approval-prompt nodrag nowheel" data-testid="approval-prompt">
      {nested && <div className="approval-where">Waiting at {waiting.nodeId}</div>}
      <div className="approval-message" data-testid="approval-message">
        {waiting.message}
      </div>
      <textarea
        className="approval-note"
        data-testid="approval-note"
        placeholder="Note (optional)"
        rows={2}
        value={note}
        onChange={(event) => setNote(event.target.value)}
      />
      <div className="approval-buttons">
        <button type="button" className="button approve" data-testid="approve" disabled={busy} onClick={() => answer(true)}>
          Approve
        </button>
        <button type="button" className="button reject" data-testid="reject" disabled={busy} onClick={() => answer(false)}>
          Reject
        </button>
      </div>
    </div>
  );
}
