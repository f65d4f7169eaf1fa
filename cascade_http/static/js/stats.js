// Summary statistics for the Compare view.

export function median(xs) {
  const v = xs.filter((x) => x !== null && x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/** Error of `simulated` against `real` in percent; null when real is 0 or either is missing. */
export function errorPct(simulated, real) {
  if (simulated === null || simulated === undefined || !real) return null;
  return ((simulated - real) / real) * 100;
}
