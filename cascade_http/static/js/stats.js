// Summary statistics for the Compare view.

export function mean(xs) {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

export function median(xs) {
  const v = xs.filter((x) => x !== null && x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/** Pearson's correlation coefficient of paired samples; null under two pairs or no spread. */
export function pearson(xs, ys) {
  const n = xs.length;
  if (n < 2) return null;
  const mx = mean(xs);
  const my = mean(ys);
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i += 1) {
    sxy += (xs[i] - mx) * (ys[i] - my);
    sxx += (xs[i] - mx) ** 2;
    syy += (ys[i] - my) ** 2;
  }
  return sxx > 0 && syy > 0 ? sxy / Math.sqrt(sxx * syy) : null;
}

/** Error of `simulated` against `real` in percent; null when real is 0 or either is missing. */
export function errorPct(simulated, real) {
  if (simulated === null || simulated === undefined || !real) return null;
  return ((simulated - real) / real) * 100;
}

/** Real vs simulated over the rows where both are known: MAPE, Pearson r, share within 10 %. */
export function accuracy(pairs) {
  const errors = pairs.map(([real, sim]) => errorPct(sim, real));
  return {
    n: pairs.length,
    mape: mean(errors.map(Math.abs)),
    r: pearson(pairs.map((p) => p[0]), pairs.map((p) => p[1])),
    within10: pairs.length ? errors.filter((e) => Math.abs(e) <= 10).length / pairs.length : null,
  };
}
