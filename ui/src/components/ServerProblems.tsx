// What went wrong asking the team's servers (Settings → Servers), one line a server, above a list
// that still shows what the others answered.

export function ServerProblems({ problems, testId }: { problems: readonly string[]; testId: string }) {
  return (
    <>
      {problems.map((problem) => (
        <p key={problem} className="field-error" data-testid={testId} role="status">
          {problem}
        </p>
      ))}
    </>
  );
}
