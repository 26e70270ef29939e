// The approval prompt, drawn on the canvas at the node a paused run waits at: the approval
// node itself, or the subflow node an approval inside a subflow belongs to.

import { useState } from 'react';
import { useRun, useSession, useSessionState } from '../hooks';

export function ApprovalPrompt({ nodeId }: { nodeId: string }) {
  const session = useSession();
  const waiting = useRun((view) => view.waiting);
  const busy = useSessionState((state) => state.busy);
  const [note, setNote] = useState('');
  if (!waiting) return null;
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
