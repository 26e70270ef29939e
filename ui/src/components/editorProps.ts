// What every field editor of the inspector takes: the editors in fields.tsx and the pickers
// made elsewhere (McpTools.tsx), which fields.tsx offers for some fields. Apart, so that a
// picker need not import the module that imports it.

import type { FieldDescription } from '../bindings';
import type { JsonValue } from '../flowMapping';

export interface EditorProps {
  field: FieldDescription;
  value: JsonValue | undefined;
  onChange: (value: JsonValue | undefined) => void;
  readOnly: boolean;
  /** Names a template may use (template fields only). */
  templateNames: string[];
}
