// One editor per field type of the catalog (`FieldType`). Each editor gets the field's
// current value and reports a new one; `undefined` removes the key from the node's data.
// Every editor carries `data-testid="field-<name>"`, the name as the catalog spells it.

import { useRef, useState, type ReactNode } from 'react';
import type { FieldDescription } from '../bindings';
import type { JsonValue } from '../flowMapping';
import { useSession, useSessionState } from '../hooks';
import type { EditorProps } from './editorProps';
import { McpToolPicker } from './McpTools';


/**
 * Local text for an input whose value is parsed: kept while it still means the stored value
 * (`1.` while typing `1.5`), replaced when the value changes from elsewhere (undo).
 */
function useDraft(value: JsonValue | undefined, format: (value: JsonValue | undefined) => string, means: (draft: string, value: JsonValue | undefined) => boolean) {
  const [draft, setDraft] = useState(() => format(value));
  const seen = useRef(value);
  if (seen.current !== value) {
    seen.current = value;
    if (!means(draft, value)) setDraft(format(value));
  }
  return [draft, setDraft] as const;
}

function textOf(value: JsonValue | undefined): string {
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** What clearing a text field writes: the empty text when that is its default, else nothing. */
function emptyText(field: FieldDescription): JsonValue | undefined {
  return field.default === '' ? '' : undefined;
}

function TextEditor({ field, value, onChange, readOnly }: EditorProps) {
  if (field.name === 'model') return <ModelEditor field={field} value={value} onChange={onChange} readOnly={readOnly} templateNames={[]} />;
  return (
    <input
      type="text"
      className="input"
      data-testid={`field-${field.name}`}
      id={controlId(field.name)}
      value={textOf(value)}
      readOnly={readOnly}
      placeholder={typeof field.default === 'string' ? field.default : undefined}
      onChange={(event) => onChange(event.target.value === '' ? emptyText(field) : event.target.value)}
    />
  );
}

/**
 * A model's name, offered from the models the configured providers list (read once when the
 * field is first focused, or again with ↻); any name can still be typed.
 */
function ModelEditor({ field, value, onChange, readOnly }: EditorProps) {
  const session = useSession();
  const models = useSessionState((state) => state.models);
  const listId = `models-${field.name}`;
  return (
    <div className="model-field">
      <input
        type="text"
        className="input"
        data-testid={`field-${field.name}`}
        id={controlId(field.name)}
        list={listId}
        value={textOf(value)}
        readOnly={readOnly}
        placeholder="e.g. gpt-4o-mini, claude-sonnet-4-5, ollama/llama3.2 (empty: the default model)"
        onFocus={() => {
          if (models === null) void session.loadModels();
        }}
        onChange={(event) => onChange(event.target.value === '' ? emptyText(field) : event.target.value)}
      />
      <datalist id={listId} data-testid="model-options">
        {(models ?? []).map((model) => (
          <option key={model} value={model} />
        ))}
      </datalist>
      {!readOnly && (
        <button
          type="button"
          className="icon-button"
          data-testid="model-refresh"
          title="List the models the configured providers offer"
          onClick={() => void session.loadModels()}
        >
          ↻
        </button>
      )}
    </div>
  );
}

function TemplateEditor({ field, value, onChange, readOnly, templateNames }: EditorProps) {
  const area = useRef<HTMLTextAreaElement>(null);
  const insert = (name: string) => {
    const element = area.current;
    const text = textOf(value);
    const snippet = `{{ ${name} }}`;
    const start = element?.selectionStart ?? text.length;
    const end = element?.selectionEnd ?? text.length;
    onChange(text.slice(0, start) + snippet + text.slice(end));
    requestAnimationFrame(() => {
      element?.focus();
      element?.setSelectionRange(start + snippet.length, start + snippet.length);
    });
  };
  return (
    <>
      <textarea
        ref={area}
        className="input mono"
        data-testid={`field-${field.name}`}
        id={controlId(field.name)}
        rows={4}
        value={textOf(value)}
        readOnly={readOnly}
        onChange={(event) => onChange(event.target.value === '' ? emptyText(field) : event.target.value)}
      />
      <div className="template-names" data-testid={`template-names-${field.name}`}>
        {templateNames.map((name) => (
          <button
            key={name}
            type="button"
            className="template-name"
            disabled={readOnly}
            title={`Insert {{ ${name} }}`}
            onClick={() => insert(name)}
          >
            {name}
          </button>
        ))}
      </div>
    </>
  );
}

function NumberEditor({ field, value, onChange, readOnly }: EditorProps) {
  const type = field.fieldType;
  const integer = type.type === 'integer';
  const bounds = type.type === 'number' || type.type === 'integer' ? type : null;
  const [draft, setDraft] = useDraft(
    value,
    (current) => (typeof current === 'number' ? String(current) : ''),
    (text, current) => (text.trim() === '' ? current === undefined : Number(text) === current),
  );
  return (
    <input
      type="number"
      className="input"
      data-testid={`field-${field.name}`}
      id={controlId(field.name)}
      value={draft}
      readOnly={readOnly}
      step={integer ? 1 : 'any'}
      min={bounds?.min ?? undefined}
      max={bounds?.max ?? undefined}
      placeholder={typeof field.default === 'number' ? String(field.default) : ''}
      onChange={(event) => {
        const text = event.target.value;
        setDraft(text);
        if (text.trim() === '') return onChange(undefined);
        const number = Number(text);
        if (!Number.isFinite(number) || (integer && !Number.isInteger(number))) return;
        onChange(number);
      }}
    />
  );
}

function BooleanEditor({ field, value, onChange, readOnly }: EditorProps) {
  const checked = typeof value === 'boolean' ? value : field.default === true;
  return (
    <input
      type="checkbox"
      className="checkbox"
      data-testid={`field-${field.name}`}
      id={controlId(field.name)}
      checked={checked}
      disabled={readOnly}
      onChange={(event) => onChange(event.target.checked)}
    />
  );
}

function ChoiceEditor({ field, value, onChange, readOnly }: EditorProps) {
  const options = field.fieldType.type === 'choice' ? field.fieldType.options : [];
  const current = typeof value === 'string' ? value : '';
  return (
    <select
      className="input"
      data-testid={`field-${field.name}`}
      id={controlId(field.name)}
      value={current}
      disabled={readOnly}
      onChange={(event) => onChange(event.target.value === '' ? undefined : event.target.value)}
    >
      {(field.default === null || current === '') && <option value="">(not set)</option>}
      {current !== '' && !options.includes(current) && <option value={current}>{current}</option>}
      {options.map((option) => (
        <option key={option} value={option}>
          {option}
        </option>
      ))}
    </select>
  );
}

function CodeEditor({ field, value, onChange, readOnly }: EditorProps) {
  return (
    <textarea
      className="input mono code"
      data-testid={`field-${field.name}`}
      id={controlId(field.name)}
      rows={8}
      spellCheck={false}
      value={textOf(value)}
      readOnly={readOnly}
      onChange={(event) => onChange(event.target.value === '' ? emptyText(field) : event.target.value)}
    />
  );
}

function formatJson(value: JsonValue | undefined): string {
  return value === undefined || value === null ? '' : JSON.stringify(value, null, 2);
}

function JsonEditor({ field, value, onChange, readOnly }: EditorProps) {
  const [draft, setDraft] = useDraft(value, formatJson, (text, current) => {
    try {
      return text.trim() === '' ? current === undefined || current === null : JSON.stringify(JSON.parse(text)) === JSON.stringify(current);
    } catch {
      return false;
    }
  });
  const [error, setError] = useState<string | null>(null);
  const commit = () => {
    if (draft.trim() === '') {
      setError(null);
      onChange(undefined);
      return;
    }
    try {
      onChange(JSON.parse(draft) as JsonValue);
      setError(null);
    } catch (problem) {
      // Invalid JSON is never written; the text stays for the person to fix.
      setError(`Not valid JSON (${(problem as Error).message}). Text needs quotes: "like this".`);
    }
  };
  return (
    <>
      <textarea
        className={`input mono ${error ? 'has-error' : ''}`}
        data-testid={`field-${field.name}`}
        id={controlId(field.name)}
        rows={4}
        spellCheck={false}
        value={draft}
        readOnly={readOnly}
        onChange={(event) => setDraft(event.target.value)}
        onBlur={commit}
      />
      {error && (
        <div className="field-error" data-testid={`field-error-${field.name}`}>
          {error}
        </div>
      )}
    </>
  );
}

interface ConditionRow {
  operator?: JsonValue;
  value?: JsonValue;
  field?: JsonValue;
  [key: string]: JsonValue | undefined;
}

/** Operators that compare numbers: a numeric value is written as a number. */
const NUMERIC_OPERATORS = new Set(['gt', 'lt']);

function ConditionsEditor({ field, value, onChange, readOnly }: EditorProps) {
  const operators = field.fieldType.type === 'conditions' ? field.fieldType.operators : [];
  const rows = (Array.isArray(value) ? value : []) as ConditionRow[];
  const write = (next: ConditionRow[]) => onChange(next as unknown as JsonValue);
  const update = (index: number, patch: Partial<ConditionRow>) =>
    write(
      rows.map((row, i) => {
        if (i !== index) return row;
        const next: ConditionRow = { ...row, ...patch };
        for (const key of Object.keys(patch)) if (patch[key] === undefined) delete next[key];
        return next;
      }),
    );
  const valueFor = (operator: string, text: string): JsonValue =>
    NUMERIC_OPERATORS.has(operator) && text.trim() !== '' && Number.isFinite(Number(text)) ? Number(text) : text;
  return (
    <div className="rows-editor" data-testid={`field-${field.name}`}>
      {rows.map((row, index) => {
        const operator = typeof row.operator === 'string' ? row.operator : '';
        return (
          <div className="condition-row" data-testid="condition-row" key={index}>
            <span className="row-index">{index}</span>
            <select
              className="input"
              data-testid={`condition-operator-${index}`}
              value={operator}
              disabled={readOnly}
              onChange={(event) => update(index, { operator: event.target.value })}
            >
              {!operators.includes(operator) && <option value={operator}>{operator || '(choose)'}</option>}
              {operators.map((option) => (
                <option key={option} value={option}>
                  {option}
                </option>
              ))}
            </select>
            <input
              className="input"
              data-testid={`condition-value-${index}`}
              placeholder="value"
              value={textOf(row.value)}
              readOnly={readOnly}
              onChange={(event) => update(index, { value: valueFor(operator, event.target.value) })}
            />
            <input
              className="input"
              data-testid={`condition-field-${index}`}
              placeholder="field (optional)"
              value={textOf(row.field)}
              readOnly={readOnly}
              onChange={(event) => update(index, { field: event.target.value === '' ? undefined : event.target.value })}
            />
            <button
              type="button"
              className="icon-button"
              data-testid={`condition-remove-${index}`}
              title="Remove this condition"
              disabled={readOnly}
              onClick={() => write(rows.filter((_, i) => i !== index))}
            >
              ×
            </button>
          </div>
        );
      })}
      <button
        type="button"
        className="button small"
        data-testid="condition-add"
        disabled={readOnly}
        onClick={() => write([...rows, { operator: operators[0] ?? 'contains', value: '' }])}
      >
        Add condition
      </button>
    </div>
  );
}

function StringListEditor({ field, value, onChange, readOnly }: EditorProps) {
  const items = Array.isArray(value) ? value.map(textOf) : [];
  return (
    <div className="rows-editor" data-testid={`field-${field.name}`}>
      {items.map((item, index) => (
        <div className="list-row" key={index}>
          <input
            className="input"
            value={item}
            readOnly={readOnly}
            onChange={(event) => onChange(items.map((old, i) => (i === index ? event.target.value : old)))}
          />
          <button
            type="button"
            className="icon-button"
            title="Remove"
            disabled={readOnly}
            onClick={() => onChange(items.filter((_, i) => i !== index))}
          >
            ×
          </button>
        </div>
      ))}
      <button type="button" className="button small" disabled={readOnly} onClick={() => onChange([...items, ''])}>
        Add
      </button>
    </div>
  );
}

type Pair = [string, string];

function StringMapEditor({ field, value, onChange, readOnly }: EditorProps) {
  const stored: Pair[] =
    typeof value === 'object' && value !== null && !Array.isArray(value)
      ? Object.entries(value).map(([key, inner]) => [key, textOf(inner as JsonValue)])
      : [];
  // Rows being typed may have an empty or repeated key, which the stored object cannot
  // hold; the rows live here and the object is written from them.
  const [rows, setRows] = useState<Pair[]>(stored);
  const seen = useRef(value);
  if (seen.current !== value) {
    seen.current = value;
    const written = JSON.stringify(Object.fromEntries(rows.filter(([key]) => key !== '')));
    if (written !== JSON.stringify(Object.fromEntries(stored))) setRows(stored);
  }
  const write = (next: Pair[]) => {
    setRows(next);
    onChange(Object.fromEntries(next.filter(([key]) => key !== '')));
  };
  return (
    <div className="rows-editor" data-testid={`field-${field.name}`}>
      {rows.map(([key, inner], index) => (
        <div className="list-row" key={index}>
          <input
            className="input"
            placeholder="name"
            value={key}
            readOnly={readOnly}
            onChange={(event) => write(rows.map((row, i) => (i === index ? [event.target.value, row[1]] : row)))}
          />
          <input
            className="input"
            placeholder="value"
            value={inner}
            readOnly={readOnly}
            onChange={(event) => write(rows.map((row, i) => (i === index ? [row[0], event.target.value] : row)))}
          />
          <button
            type="button"
            className="icon-button"
            title="Remove"
            disabled={readOnly}
            onClick={() => write(rows.filter((_, i) => i !== index))}
          >
            ×
          </button>
        </div>
      ))}
      <button type="button" className="button small" disabled={readOnly} onClick={() => write([...rows, ['', '']])}>
        Add
      </button>
    </div>
  );
}

const EDITORS: Record<FieldDescription['fieldType']['type'], (props: EditorProps) => ReactNode> = {
  text: TextEditor,
  template: TemplateEditor,
  number: NumberEditor,
  integer: NumberEditor,
  boolean: BooleanEditor,
  choice: ChoiceEditor,
  code: CodeEditor,
  json: JsonEditor,
  conditions: ConditionsEditor,
  stringList: StringListEditor,
  stringMap: StringMapEditor,
  flowPath: TextEditor,
};

/** Fields whose entries are picked from what the flow's MCP servers list. */
const PICKERS: Record<string, (props: EditorProps) => ReactNode> = {
  'tools.mcp': (props) => <McpToolPicker {...props} mode="use" />,
  approveTools: (props) => <McpToolPicker {...props} mode="approve" />,
};

/** The id of a field's control, which its label names. */
function controlId(name: string): string {
  return `inspector-field-${name}`;
}

/** Editors of several controls (rows): their label names none of them. */
const ROWS = new Set<FieldDescription['fieldType']['type']>(['conditions', 'stringList', 'stringMap']);

/** A field's editor with its label and help. */
export function FieldRow(props: EditorProps) {
  const { field } = props;
  const Editor = PICKERS[field.name] ?? EDITORS[field.fieldType.type] ?? TextEditor;
  const inline = field.fieldType.type === 'boolean';
  const labelled = !inline && !ROWS.has(field.fieldType.type);
  return (
    <div className={`field field-type-${field.fieldType.type} ${inline ? 'inline' : ''}`}>
      <label className="field-label" htmlFor={labelled ? controlId(field.name) : undefined}>
        {inline && <Editor {...props} />}
        <span>
          {field.label}
          {field.required && <span className="required" title="Required"> *</span>}
        </span>
      </label>
      {!inline && <Editor {...props} />}
      {field.help && <div className="field-help">{field.help}</div>}
    </div>
  );
}
