// A sim by its id alone (#/sims/{id}), as a cached sim's marker links its source, which may
// be of another run: the sim's run is looked up in the read model (POST /api/sql, a sim's
// row and no more) and opens.

import { api, enc } from "../api.js";
import { clear, failure, h, loading } from "../dom.js";

const literal = (text) => `'${text.replaceAll("'", "''")}'`;

async function runOf(simId, signal) {
  const answer = await api("/api/sql", { method: "POST", json: { sql: `SELECT run_id FROM sims WHERE id = ${literal(simId)}` }, signal });
  if (!answer.rows.length) throw new Error(`No sim has the id ${simId}.`);
  return answer.rows[0][0];
}

export function mountSimLink(root, { id }) {
  const aborter = new AbortController();
  const go = () => {
    clear(root, h("div", { class: "page" }, loading(`Finding sim ${id}…`)));
    runOf(id, aborter.signal)
      .then((run) => location.replace(`#/runs/${enc(run)}`))
      .catch((err) => err.name !== "AbortError" && clear(root, h("div", { class: "page" }, failure(err, go))));
  };
  go();
  return { destroy: () => aborter.abort() };
}
