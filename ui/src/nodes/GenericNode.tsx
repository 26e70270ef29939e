// The one node component every kind is drawn with. What differs between kinds (handles,
// title, summary) comes from the kind's description in the catalog; only a kind that shows
// something live gets a body of its own (agent: streamed tokens; start: its schedules).

import { memo, type ComponentType } from 'react';
import { Handle, Position, type NodeProps } from '@xyflow/react';
import { handlesOf, kindOf, labelOf, summaryOf } from '../catalog';
import { DEFAULT_TARGET_HANDLE, type CanvasNode } from '../flowMapping';
import { useCanvas, useRun, useSessionState } from '../hooks';
import { promptNodeOf } from '../runStore';
import { staleNodes } from '../stale';
import { costText, tokensText } from '../cost';
import type { Problem } from '../bindings';
import { AgentStream } from './agent';
import { ApprovalPrompt } from './approval';
import { StartSchedules } from './start';

/** Bodies of kinds that need one, by kind id. */
const KIND_BODIES: Record<string, ComponentType<{ nodeId: string }>> = {
  agent: AgentStream,
  start: StartSchedules,
};

const NO_PROBLEMS: Problem[] = [];

function GenericNodeView({ id, data, selected }: NodeProps<CanvasNode>) {
  const node = data.node;
  const kind = useSessionState((state) => kindOf(state.catalog, node.type));
  const viewing = useSessionState((state) => state.viewing !== null);
  // Problems name the edited flow's nodes; a past run's flow is not validated.
  const problems = useSessionState((state) =>
    state.viewing ? NO_PROBLEMS : state.problemsByNode[id] ?? NO_PROBLEMS,
  );
  const status = useRun((view) => view.nodeStatus[id] ?? 'idle');
  const nodeError = useRun((view) => view.nodeErrors[id]);
  const prompting = useRun((view) => view.status === 'paused' && promptNodeOf(view.waiting) === id);
  const flowPath = useCanvas((state) => state.path);
  const breakpoint = useSessionState((state) =>
    state.viewing ? undefined : state.breakpoints[flowPath ?? '']?.[id],
  );
  const pinned = useSessionState((state) => !state.viewing && state.pins[flowPath ?? '']?.[id] !== undefined);
  const ranFlow = useSessionState((state) => (state.viewing ? null : state.ranFlow));
  const stale = useCanvas((state) => staleNodes(ranFlow, state.flow).has(id));
  // How the node differs from the version the open flow is compared with (History → Versions).
  const compareMark = useSessionState((state) => (state.viewing ? undefined : state.flowCompare?.marks[id]));
  // What the node's LLM calls cost in the run shown (every visit, item and subagent call).
  const cost = useSessionState((state) => state.visits?.cost.nodes[id] ?? state.viewing?.cost.nodes[id]);

  const handles = handlesOf(kind, node.data);
  const sideHandles = handles.filter((handle) => handle.kind !== 'subagent');
  const subagentHandle = handles.find((handle) => handle.kind === 'subagent');
  const errors = problems.filter((problem) => problem.severity === 'error');
  const Body = KIND_BODIES[node.type];
  const summary = summaryOf(kind, node.data);
  const classes = [
    'weft-node',
    `kind-${node.type}`,
    `status-${status}`,
    selected ? 'selected' : '',
    stale ? 'stale' : '',
    compareMark ? `compare-${compareMark}` : '',
    errors.length > 0 ? 'invalid' : problems.length > 0 ? 'warned' : '',
    kind ? '' : 'unknown-kind',
  ];

  return (
    <div
      className={classes.filter(Boolean).join(' ')}
      data-testid={`node-${id}`}
      data-status={status}
      data-invalid={errors.length > 0 ? 'true' : 'false'}
      data-kind={node.type}
      title={problems.length > 0 ? problems.map((problem) => problem.message).join('\n') : undefined}
    >
      {(kind?.inputs ?? true) && (
        <Handle
          type="target"
          position={Position.Left}
          id={DEFAULT_TARGET_HANDLE}
          className="handle-input"
          isConnectable={!viewing}
        />
      )}
      <div className="node-header">
        {breakpoint && (
          <span
            className="breakpoint-badge"
            data-testid={`breakpoint-${id}`}
            data-when={breakpoint.when}
            title={`Stops ${breakpoint.when} it runs${breakpoint.condition ? ` when ${breakpoint.condition}` : ''}`}
          >
            ●
          </span>
        )}
        <span className="node-label">{labelOf(node)}</span>
        {stale && (
          <span className="stale-badge" data-testid={`stale-${id}`} title="Edited since the last run, or after a node that was: its result may differ now">
            stale
          </span>
        )}
        {compareMark && (
          <span
            className={`compare-badge compare-${compareMark}`}
            data-testid={`diff-${id}`}
            title={compareMark === 'added' ? 'Not in the version compared with' : 'Changed since the version compared with: the inspector lists what'}
          >
            {compareMark}
          </span>
        )}
        {pinned && (
          <span className="pin-badge" data-testid={`pin-${id}`} title="Pinned: its pinned output stands for it; it does not run">
            pinned
          </span>
        )}
        {problems.length > 0 && (
          <span
            className={`problem-marker ${errors.length > 0 ? 'error' : 'warning'}`}
            data-testid={`problem-marker-${id}`}
            title={problems.map((problem) => problem.message).join('\n')}
          >
            !
          </span>
        )}
        <span className={`status-badge status-${status}`} data-testid={`status-${id}`}>
          {status}
        </span>
      </div>
      <div className="node-kind">
        {kind?.title ?? `Unknown kind “${node.type}”`}
        <span className="node-id">{id}</span>
        {cost && cost.calls > 0 && (
          <span
            className="cost-badge"
            data-testid={`cost-${id}`}
            title={`${cost.calls === 1 ? '1 LLM call' : `${cost.calls} LLM calls`} · tokens in/out ${tokensText(cost)}`}
          >
            {costText(cost)}
          </span>
        )}
      </div>
      {summary && <div className="node-summary">{summary}</div>}
      {nodeError && status === 'failed' && <div className="node-error">{nodeError}</div>}
      {Body && <Body nodeId={id} />}
      {prompting && <ApprovalPrompt nodeId={id} />}
      {sideHandles.length > 0 && (
        <div className="node-ports">
          {sideHandles.map((handle) => (
            <div key={handle.id} className={`node-port port-${handle.kind}`}>
              <span className="port-label">{handle.label}</span>
              <Handle
                type="source"
                position={Position.Right}
                id={handle.id}
                className={`handle-${handle.kind}`}
                isConnectable={!viewing}
                title={handle.label}
              />
            </div>
          ))}
        </div>
      )}
      {subagentHandle && (
        <Handle
          type="source"
          position={Position.Bottom}
          id={subagentHandle.id}
          className="handle-subagent"
          isConnectable={!viewing}
          title={`${subagentHandle.label}: connect to agents this one may call as tools`}
        />
      )}
    </div>
  );
}

/**
 * Whether a node's drawing stands for `next` as it did for `previous`: the props it reads are
 * its id, data and selection. xyflow hands every node its measured size and position too, and
 * a drawing redone for those drew each node of a flow just opened several times over: it is
 * measured, then measured again once the fit's zoom enlarges its text.
 */
export function sameNodeDrawing(previous: NodeProps<CanvasNode>, next: NodeProps<CanvasNode>): boolean {
  return previous.id === next.id && previous.data === next.data && previous.selected === next.selected;
}

export const GenericNode = memo(GenericNodeView, sameNodeDrawing);
