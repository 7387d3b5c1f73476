// MAJOR.MINOR.PATCH versions, as contracts, assemblies and workflows carry them.

/** Orders `MAJOR.MINOR.PATCH` versions numerically. */
export function compareSemver(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) - (pb[i] ?? 0);
  return 0;
}

/** The major version: versions that share it must stay compatible. */
export const majorOf = (version: string) => version.split('.')[0]!;
