// Stale marks (docs/debugging.md): after an edit, the edited node and every node downstream of it no
// longer show what the flow as it is now would give; "Run from here" is offered at the earliest.

import type { CanvasFlow } from './flowMapping';
import { isSubagentEdge } from './flowMapping';

/** What of a node an edit changes the run of: its kind, its data, and where its inputs come from. */
function fingerprint(flow: CanvasFlow, nodeId: string): string {
  const node = flow.nodes.find((candidate) => candidate.id === nodeId);
  if (!node) return '';
  const incoming = flow.edges
    .filter((edge) => edge.target === nodeId)
    .map((edge) => `${edge.source}:${edge.sourceHandle ?? ''}`)
    .sort();
  // Subagents an agent calls are part of what it does.
  const subagents = flow.edges
    .filter((edge) => edge.source === nodeId && isSubagentEdge(edge))
    .map((edge) => fingerprintOfData(flow, edge.target))
    .sort();
  return JSON.stringify([node.type, node.data ?? {}, incoming, subagents]);
}

function fingerprintOfData(flow: CanvasFlow, nodeId: string): string {
  const node = flow.nodes.find((candidate) => candidate.id === nodeId);
  return JSON.stringify([nodeId, node?.type, node?.data ?? {}]);
}

let memo: { ran: CanvasFlow; now: CanvasFlow; stale: ReadonlySet<string> } | null = null;

/**
 * The nodes of `now` whose result the run of `ran` no longer stands for: those edited, added or
 * rewired since, and every node after them along execution edges. Every node of a canvas asks
 * with the same two flows, so the answer is kept for the last pair.
 */
export function staleNodes(ran: CanvasFlow | null, now: CanvasFlow): ReadonlySet<string> {
  if (!ran) return new Set();
  if (memo && memo.ran === ran && memo.now === now) return memo.stale;
  const stale = new Set<string>();
  for (const node of now.nodes) {
    if (fingerprint(ran, node.id) !== fingerprint(now, node.id)) stale.add(node.id);
  }
  const frontier = [...stale];
  while (frontier.length > 0) {
    const from = frontier.pop()!;
    for (const edge of now.edges) {
      if (edge.source === from && !isSubagentEdge(edge) && !stale.has(edge.target)) {
        stale.add(edge.target);
        frontier.push(edge.target);
      }
    }
  }
  memo = { ran, now, stale };
  return stale;
}

/** The first stale node (in the flow's order) that no other stale node leads to. */
export function earliestStale(now: CanvasFlow, stale: ReadonlySet<string>): string | null {
  const fed = new Set(
    now.edges.filter((edge) => stale.has(edge.source) && !isSubagentEdge(edge)).map((edge) => edge.target),
  );
  return now.nodes.find((node) => stale.has(node.id) && !fed.has(node.id))?.id ?? null;
}
