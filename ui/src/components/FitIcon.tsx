// The "fit the flow" buttons' icon, drawn. It was the character ⤢ (U+2922), which the usual
// sans-serif fonts (DejaVu Sans among them) lack: WebKit then searched every font on the
// system for it at each size it was shown, inside the window's first frame, and drew it from
// another typeface.

/** A diagonal arrow with a head at each end, in the text's colour. */
export function FitIcon() {
  return (
    <svg className="fit-icon" viewBox="0 0 16 16" width="14" height="14" aria-hidden="true" focusable="false">
      <path d="M3 13 13 3M8 3h5v5M3 8v5h5" fill="none" stroke="currentColor" strokeWidth="1.6" strokeLinecap="round" strokeLinejoin="round" />
    </svg>
  );
}
