// What a person answers at an approval: the message, the form the approval asks (text,
// choice, number, the draft to edit), a note, and Approve / Reject. The same form is on the
// paused node, in the side panel and in the inbox; the engine checks the answers again.

import { useState } from 'react';
import type { FormField, Value } from '../bindings';

/** When an approval's time runs out, in words: `times out at 14:05` (local time). */
export function deadlineText(deadline: string | null | undefined): string | null {
  if (!deadline) return null;
  const date = new Date(deadline);
  if (Number.isNaN(date.getTime())) return null;
  return `times out at ${date.toLocaleString()}`;
}

function initialAnswers(fields: FormField[], draft: Value | undefined): Record<string, string> {
  const answers: Record<string, string> = {};
  for (const field of fields) {
    if (field.type === 'draft') answers[field.name] = typeof draft === 'string' ? draft : JSON.stringify(draft ?? '');
    else if (field.type === 'choice') answers[field.name] = '';
    else answers[field.name] = '';
  }
  return answers;
}

export interface ApprovalFormProps {
  /** Prefixes the test ids (`` on the node, `panel-` in the side panel, `inbox-` in the inbox). */
  testIdPrefix?: string;
  message: string;
  fields: FormField[];
  /** What the approval was given: a draft field starts as it. */
  input?: Value;
  deadline?: string | null;
  where?: string | null;
  disabled: boolean;
  /** Why this person may not decide it (not an approver, started the run, answered already). */
  refusal?: string | null;
  onDecide: (approve: boolean, note: string, fields: Record<string, Value>) => Promise<void>;
}

export function ApprovalForm({ testIdPrefix = '', message, fields, input, deadline, where, disabled, refusal, onDecide }: ApprovalFormProps) {
  const [note, setNote] = useState('');
  const [answers, setAnswers] = useState<Record<string, string>>(() => initialAnswers(fields, input));
  const [problem, setProblem] = useState<string | null>(null);
  const id = (name: string) => `${testIdPrefix}${name}`;

  const decide = (approve: boolean) => {
    const given: Record<string, Value> = {};
    for (const field of fields) {
      const answer = answers[field.name] ?? '';
      if (answer === '') {
        if (approve && field.required) {
          setProblem(`“${field.label || field.name}” needs an answer.`);
          return;
        }
        continue;
      }
      if (field.type === 'number') {
        const number = Number(answer);
        if (!Number.isFinite(number)) {
          setProblem(`“${field.label || field.name}” takes a number.`);
          return;
        }
        given[field.name] = number;
      } else {
        given[field.name] = answer;
      }
    }
    setProblem(null);
    void onDecide(approve, note, given).then(() => setNote(''));
  };

  const timeout = deadlineText(deadline);
  return (
    <div className="approval-form">
      {where && <div className="approval-where">Waiting at {where}</div>}
      <div className="approval-message" data-testid={id('approval-message')}>
        {message}
      </div>
      {timeout && (
        <div className="approval-deadline muted" data-testid={id('approval-deadline')}>
          {timeout}
        </div>
      )}
      {fields.map((field) => {
        const label = field.label || field.name;
        const value = answers[field.name] ?? '';
        const set = (text: string) => setAnswers((now) => ({ ...now, [field.name]: text }));
        const testId = id(`approval-field-${field.name}`);
        return (
          <label key={field.name} className="approval-field">
            <span className="field-label">
              {label}
              {field.required ? ' *' : ''}
            </span>
            {field.type === 'choice' ? (
              <select className="input" data-testid={testId} value={value} onChange={(event) => set(event.target.value)}>
                <option value="">—</option>
                {(field.options ?? []).map((option) => (
                  <option key={option} value={option}>
                    {option}
                  </option>
                ))}
              </select>
            ) : field.type === 'draft' ? (
              <textarea className="input" data-testid={testId} rows={4} value={value} onChange={(event) => set(event.target.value)} />
            ) : (
              <input
                className="input"
                data-testid={testId}
                type={field.type === 'number' ? 'number' : 'text'}
                value={value}
                onChange={(event) => set(event.target.value)}
              />
            )}
          </label>
        );
      })}
      <textarea
        className="approval-note"
        data-testid={id('approval-note')}
        placeholder="Note (optional)"
        rows={2}
        value={note}
        onChange={(event) => setNote(event.target.value)}
      />
      {problem && (
        <div className="field-error" data-testid={id('approval-problem')}>
          {problem}
        </div>
      )}
      {refusal && (
        <div className="muted" data-testid={id('refusal')}>
          {refusal}
        </div>
      )}
      <div className="approval-buttons">
        <button
          type="button"
          className="button approve"
          data-testid={id('approve')}
          disabled={disabled || Boolean(refusal)}
          title={refusal ?? undefined}
          onClick={() => decide(true)}
        >
          Approve
        </button>
        <button
          type="button"
          className="button reject"
          data-testid={id('reject')}
          disabled={disabled || Boolean(refusal)}
          title={refusal ?? undefined}
          onClick={() => decide(false)}
        >
          Reject
        </button>
      </div>
    </div>
  );
}
