// Sign-in: the API token, asked for once and traded for the browser's session cookie (the
// token itself is kept nowhere), which signs every tab of this browser in until Sign out.

import { session } from "../api.js";
import { h } from "../dom.js";

export function mountSignIn(el, { message, done }) {
  document.title = "Sign in · Cascade";
  const input = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "current-password",
    required: true,
    spellcheck: "false",
    "aria-describedby": "token-help token-error",
  });
  const error = h("p", { id: "token-error", class: "field-error", role: "alert" }, message ?? "");
  const submit = h("button", { class: "btn btn-primary", type: "submit" }, "Sign in");

  async function signIn(e) {
    e.preventDefault();
    const value = input.value.trim();
    if (!value) {
      error.textContent = "Enter the API token.";
      input.focus();
      return;
    }
    submit.disabled = true;
    error.textContent = "";
    try {
      await session.signIn({ token: value });
      done();
    } catch (err) {
      error.textContent = err.status === 401 ? `The API refused this token: ${err.message}` : err.message;
      submit.disabled = false;
      input.select();
    }
  }

  el.append(
    h(
      "div",
      { class: "signin" },
      h(
        "form",
        { class: "card signin-card", onsubmit: signIn, novalidate: true },
        h("h1", {}, "Sign in to Cascade"),
        h("label", { for: "token" }, "API token"),
        input,
        h("p", { id: "token-help", class: "hint" }, h("code", {}, "cascade serve"), " prints it on first start; it is also in the data dir's ", h("code", {}, "token"), " file. Signs in every tab of this browser until you sign out."),
        error,
        submit,
      ),
    ),
  );
  input.focus();
  return {};
}
