// The validator's problems for the edited flow. Clicking one selects what it names and
// brings it into view.

import { useReactFlow } from '@xyflow/react';
import { useCanvas, useSession, useSessionState } from '../hooks';

export function ProblemsPanel() {
  const session = useSession();
  const problems = useSessionState((state) => state.problems);
  const flow = useCanvas((state) => state.flow);
  const { fitView } = useReactFlow();

  const reveal = (nodeId?: string | null, edgeId?: string | null) => {
    session.backToEditing();
    if (nodeId && flow.nodes.some((node) => node.id === nodeId)) {
      session.canvas.select([nodeId], []);
      void fitView({ nodes: [{ id: nodeId }], duration: 200, maxZoom: 1.2 });
    } else if (edgeId) {
      const edge = flow.edges.find((candidate) => candidate.id === edgeId);
      session.canvas.select([], edge ? [edgeId] : []);
      const ends = edge ? [edge.source, edge.target].filter((id) => flow.nodes.some((node) => node.id === id)) : [];
      if (ends.length > 0) void fitView({ nodes: ends.map((id) => ({ id })), duration: 200, maxZoom: 1.2 });
    }
  };

  return (
    <div className="problems" data-testid="problems">
      {problems.length === 0 && <p className="muted">No problems: the flow can run.</p>}
      <ul className="problem-list">
        {problems.map((problem, index) => (
          <li key={`${problem.code}-${problem.nodeId ?? ''}-${problem.edgeId ?? ''}-${index}`}>
            <button
              type="button"
              className={`problem ${problem.severity}`}
              data-testid="problem"
              data-severity={problem.severity}
              data-code={problem.code}
              data-node-id={problem.nodeId ?? undefined}
              data-edge-id={problem.edgeId ?? undefined}
              title={problem.code}
              onClick={() => reveal(problem.nodeId, problem.edgeId)}
            >
              <span className="problem-icon" aria-hidden="true">
                {problem.severity === 'error' ? '●' : '▲'}
              </span>
              <span className="problem-where">{problem.nodeId ?? problem.edgeId ?? 'flow'}</span>
              <span className="problem-message">{problem.message}</span>
            </button>
          </li>
        ))}
      </ul>
    </div>
  );
}
