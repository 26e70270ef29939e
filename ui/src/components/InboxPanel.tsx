// Every approval waiting for a person, across flows and runs (this app's, `weft`'s and a
// server's, all in the same store), decided right here; and the approval of the run shown,
// also in the side panel (it is on its node too).

import type { ApprovalProgress, PendingApproval } from '../bindings';
import { useRun, useSession, useSessionState } from '../hooks';
import { ServerProblems } from './ServerProblems';
import { ApprovalForm } from './ApprovalForm';

function sinceText(since: string): string {
  const date = new Date(since);
  return Number.isNaN(date.getTime()) ? since : date.toLocaleString();
}

/** Who approved an approval that needs several people, and who is still needed. */
function Progress({ progress }: { progress: ApprovalProgress }) {
  const approved = progress.approvedBy.length > 0 ? `approved by ${progress.approvedBy.join(', ')}` : 'nobody has approved yet';
  const from = progress.mayStillApprove.length > 0 ? `, from ${progress.mayStillApprove.join(', ')}` : '';
  return (
    <div className="muted" data-testid="inbox-progress">
      {progress.approvedBy.length} of {progress.required} ({approved}); still needed: {progress.stillNeeded} more{from}
      {!progress.allowSelf && ' (not whoever started the run)'}
      {progress.remindedAt && ` · reminded ${sinceText(progress.remindedAt)}`}
      {progress.escalatedAt && ` · escalated ${sinceText(progress.escalatedAt)}`}
    </div>
  );
}

function InboxItem({ approval }: { approval: PendingApproval }) {
  const session = useSession();
  const busy = useSessionState((state) => state.busy);
  const server = approval.server ?? null;
  const blocked = session.openRunBlockedReason();
  const flow = approval.flowName || approval.flow || 'Untitled';
  return (
    <li
      className="inbox-item"
      data-testid="inbox-item"
      data-run-id={approval.runId}
      data-node-id={approval.nodeId}
      data-server={server ?? undefined}
    >
      <div className="inbox-head">
        {server !== null && (
          <span className="server-badge" data-testid="inbox-server" title={`Waits on server ${server}`}>
            {server}
          </span>
        )}
        <strong>{flow}</strong>
        <span className="muted mono">
          {approval.nodeId} · {approval.runId.slice(0, 8)}
        </span>
      </div>
      <div className="muted">waiting since {sinceText(approval.since)}</div>
      {approval.approval && <Progress progress={approval.approval} />}
      <ApprovalForm
        key={`${approval.runId}:${approval.nodeId}`}
        testIdPrefix="inbox-"
        message={approval.message}
        fields={approval.fields ?? []}
        input={approval.input}
        deadline={approval.deadline}
        disabled={busy}
        refusal={approval.refusal}
        onDecide={(approve, note, fields) => session.decideFromInbox(approval.runId, approve, note, fields)}
      />
      <button
        type="button"
        className="button small"
        data-testid="inbox-open-run"
        disabled={blocked !== null}
        title={blocked ?? (server !== null ? `Show this run of server ${server} on the canvas` : 'Show this run on the canvas')}
        onClick={() => void session.openRun(approval.runId, server)}
      >
        Open run
      </button>
    </li>
  );
}

export function InboxPanel() {
  const session = useSession();
  const inbox = useSessionState((state) => state.inbox);
  const problems = useSessionState((state) => state.inboxProblems);
  return (
    <div className="inbox" data-testid="inbox">
      <div className="history-toolbar">
        <button type="button" className="button small" data-testid="inbox-refresh" onClick={() => void session.refreshInbox()}>
          Refresh
        </button>
        <span className="muted">
          {inbox.length === 0 ? 'Nothing waits for a decision.' : `${inbox.length} waiting for a decision`}
        </span>
      </div>
      <ServerProblems problems={problems} testId="inbox-server-problem" />
      <ul className="inbox-list">
        {inbox.map((approval) => (
          <InboxItem key={`${approval.runId}:${approval.nodeId}`} approval={approval} />
        ))}
      </ul>
    </div>
  );
}

/** The approval the run shown waits at, at the top of the side panel, whatever the tab. */
export function PausedApprovalCard() {
  const session = useSession();
  const waiting = useRun((view) => (view.status === 'paused' ? view.waiting : null));
  const runId = useRun((view) => view.runId);
  const viewing = useSessionState((state) => state.viewing !== null);
  const busy = useSessionState((state) => state.busy);
  const pending = useSessionState((state) => state.inbox.find((approval) => approval.runId === runId) ?? null);
  if (!waiting || waiting.breakpoint || viewing) return null;
  const fields = pending?.fields ?? [];
  return (
    <section className="paused-card" data-testid="paused-card">
      <h3 className="section-title">Waiting for your decision</h3>
      <ApprovalForm
        key={`${runId}:${fields.length}`}
        testIdPrefix="panel-"
        message={waiting.message}
        fields={fields}
        input={pending?.input}
        deadline={pending?.deadline}
        where={waiting.nodeId}
        disabled={busy}
        refusal={pending?.refusal}
        onDecide={(approve, note, answers) => session.answerApproval(approve, note, answers)}
      />
    </section>
  );
}
