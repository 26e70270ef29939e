// The open flow compared with another version of it (a kept version, a run's flow, another
// file), drawn over the canvas: what the diff Rust computed means for each node.

import type { FieldChange, FlowComparison, FlowDiff } from './bindings';
import { canvasFlow, type CanvasFlow, type FlowNode } from './flowMapping';

/** How a node of the open flow differs from the version it is compared with. */
export type NodeMark = 'added' | 'changed';

export interface FlowCompareView {
  /** Which version: "flow version 3f2a9c1d0b4e", "the flow of run …", a file's path. */
  label: string;
  /** What the person asked to compare with (a hash, a run id, a path): asked again after edits. */
  against: string;
  /** The other version. */
  other: CanvasFlow;
  /** From the other version to the open flow. */
  diff: FlowDiff;
  /** Nodes of the open flow that are new or changed, by id. */
  marks: Record<string, NodeMark>;
  /** The changed fields of each changed node, by id. */
  fields: Record<string, FieldChange[]>;
  /** Nodes of the other version the open flow no longer has, drawn as ghosts where they were. */
  removed: FlowNode[];
}

export function flowCompareView(against: string, comparison: FlowComparison): FlowCompareView {
  const { diff } = comparison;
  const other = canvasFlow(comparison.against);
  const marks: Record<string, NodeMark> = {};
  const fields: Record<string, FieldChange[]> = {};
  for (const node of diff.nodesAdded) marks[node.id] = 'added';
  for (const change of diff.nodesChanged) {
    marks[change.node.id] = 'changed';
    fields[change.node.id] = change.fields;
  }
  const removedIds = new Set(diff.nodesRemoved.map((node) => node.id));
  const removed = other.nodes.filter((node) => removedIds.has(node.id));
  return { label: comparison.label, against, other, diff, marks, fields, removed };
}

/** "2 added · 1 removed · 3 changed · 1 edge added", or "no changes". */
export function changeCounts(diff: FlowDiff): string {
  const parts: string[] = [];
  const count = (n: number, what: string) => n > 0 && parts.push(`${n} ${what}`);
  count(diff.nodesAdded.length, 'added');
  count(diff.nodesRemoved.length, 'removed');
  count(diff.nodesChanged.length, 'changed');
  count(diff.edgesAdded.length, diff.edgesAdded.length === 1 ? 'edge added' : 'edges added');
  count(diff.edgesRemoved.length, diff.edgesRemoved.length === 1 ? 'edge removed' : 'edges removed');
  count(diff.settings.length + diff.flow.length, diff.settings.length + diff.flow.length === 1 ? 'setting changed' : 'settings changed');
  count(diff.nodesMoved.length, 'moved');
  return parts.length > 0 ? parts.join(' · ') : 'no changes';
}

/** A field's value in a line: text as it is, anything else as JSON, absent as "(none)". */
export function fieldValueText(value: unknown): string {
  if (value === null || value === undefined) return '(none)';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** The id ghost nodes are drawn under, apart from the open flow's ids. */
export const GHOST_PREFIX = 'ghost:';
/** The xyflow node type of a ghost. */
export const GHOST_NODE_TYPE = 'weft-ghost';
