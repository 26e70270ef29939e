// Helpers over the engine's kind catalog (`describeKinds`). The canvas knows no kind by
// name: handles, fields, defaults and titles all come from here.

import type {
  FieldDescription,
  HandleKind,
  KindCatalog,
  KindDescription,
} from './bindings';
import { getPath, setPath, type CanvasFlow, type JsonValue, type NodeData } from './flowMapping';

export type { FieldDescription, KindCatalog, KindDescription };

/** A handle as drawn on one node: dynamic patterns expanded for that node's rows. */
export interface NodeHandle {
  id: string;
  label: string;
  kind: HandleKind;
}

export function kindOf(catalog: KindCatalog | null, kindId: string): KindDescription | undefined {
  return catalog?.kinds.find((kind) => kind.id === kindId);
}

const ROW_INDEX = '{i}';


/** What a row says, for a handle's label: `contains refund`, `amount gt 100`. */
function rowLabel(row: JsonValue | undefined): string | undefined {
  if (typeof row === 'string') return row;
  if (typeof row !== 'object' || row === null || Array.isArray(row)) return undefined;
  const parts = [row.field, row.operator, row.value]
    .filter((part) => part !== undefined && part !== null && part !== '')
    .map((part) => (typeof part === 'string' ? part : JSON.stringify(part)));
  return parts.length > 0 ? parts.join(' ') : undefined;
}

/** The handles edges may leave `data`'s node by, in drawing order. */
export function handlesOf(kind: KindDescription | undefined, data: NodeData | undefined): NodeHandle[] {
  if (!kind) return [];
  const handles: NodeHandle[] = [];
  for (const handle of kind.handles) {
    if (handle.rows === null) {
      handles.push({ id: handle.id, label: handle.label, kind: handle.kind });
      continue;
    }
    // One handle per row of the list field the description names (`if`: its conditions).
    const rows = getPath(data, handle.rows);
    if (!Array.isArray(rows)) continue;
    rows.forEach((row, index) => {
      const i = String(index);
      handles.push({
        id: handle.id.replaceAll(ROW_INDEX, i),
        label: rowLabel(row) ?? handle.label.replaceAll(ROW_INDEX, i),
        kind: handle.kind,
      });
    });
  }
  return handles;
}

/**
 * The inspector's fields for `kind`: the common text fields (label, description) first, then
 * the kind's own, then the remaining common ones (timeouts, retries). A kind field with the
 * same name as a common one replaces it.
 */
export function fieldsOf(catalog: KindCatalog, kind: KindDescription | undefined): FieldDescription[] {
  const own = kind?.fields ?? [];
  const ownNames = new Set(own.map((field) => field.name));
  const common = catalog.commonFields.filter((field) => !ownNames.has(field.name));
  const leading = common.filter((field) => field.fieldType.type === 'text');
  const trailing = common.filter((field) => field.fieldType.type !== 'text');
  return [...leading, ...own, ...trailing];
}

/**
 * A new node's data: the non-null defaults of the kind's own fields, and the kind's title as
 * its label. The common fields (timeouts, retries) stay out of the file until someone sets
 * them: the engine's defaults apply, and new nodes do not fill files with noise.
 */
export function defaultData(kind: KindDescription): NodeData {
  let data: NodeData = {};
  for (const field of kind.fields) {
    if (field.default !== null && field.default !== undefined) {
      data = setPath(data, field.name, structuredClone(field.default) as JsonValue);
    }
  }
  return setPath(data, 'label', kind.title);
}

/**
 * Names a template in node `nodeId` may use: the engine's scope names, `nodes.<id>` of every
 * other node and `vars.<name>` of the flow's variables.
 */
export function templateNamesFor(catalog: KindCatalog, flow: CanvasFlow, nodeId: string): string[] {
  const names = [...catalog.templateNames];
  for (const node of flow.nodes) {
    if (node.id !== nodeId) names.push(`nodes.${node.id}`);
  }
  const vars = flow.settings?.vars;
  if (typeof vars === 'object' && vars !== null && !Array.isArray(vars)) {
    for (const name of Object.keys(vars)) names.push(`vars.${name}`);
  }
  return names;
}

/** The node's label, else its id (what the engine names it by in logs). */
export function labelOf(node: { id: string; data?: NodeData }): string {
  const label = getPath(node.data, 'label');
  return typeof label === 'string' && label.trim() !== '' ? label : node.id;
}

const SUMMARY_LENGTH = 60;

/**
 * One short line about what the node does, from its first filled-in field of the kind:
 * a prompt, a template, a URL, the number of conditions.
 */
export function summaryOf(kind: KindDescription | undefined, data: NodeData | undefined): string {
  if (!kind) return '';
  for (const field of kind.fields) {
    const value = getPath(data, field.name);
    if (field.fieldType.type === 'conditions' && Array.isArray(value)) {
      return value.length === 1 ? '1 condition' : `${value.length} conditions`;
    }
    const shown =
      typeof value === 'string'
        ? value
        : field.fieldType.type === 'json' && value !== undefined && value !== null
          ? JSON.stringify(value)
          : '';
    if (shown.trim() !== '') {
      const text = shown.replace(/\s+/g, ' ').trim();
      return text.length > SUMMARY_LENGTH ? `${text.slice(0, SUMMARY_LENGTH - 1)}…` : text;
    }
  }
  return '';
}

/**
 * Whether nodes of `kind` ever run: a kind with no input and no way out (a note) never
 * does, so it is not "skipped" when a run ends without it.
 */
export function kindRuns(kind: KindDescription | undefined): boolean {
  return !kind || kind.inputs || kind.handles.length > 0;
}
