// "Fork from here" on a step of a run's timeline: a new run whose conversation is this
// run's up to and including the step, with an optional message (POST /v1/runs/{id}/fork,
// docs/forks.md). The new run's page opens once it has started.

import { post, ApiError } from "./api.js";
import { h, replace } from "./dom.js";
import { navigate } from "./nav.js";

export function forkControl(runId, step) {
  const message = h("textarea", { class: "fork-message", rows: "2", "aria-label": `Message for the fork at step ${step}`,
    placeholder: "Optional: a message the new run reads after this step (a hint, a correction)" });
  const note = h("span", { class: "error fork-error" });
  const send = h("button", { class: "fork-send", onclick: async () => {
    send.disabled = true;
    replace(note);
    const body = { step };
    if (message.value.trim()) body.message = message.value;
    try {
      const fork = await post(`/v1/runs/${encodeURIComponent(runId)}/fork`, body);
      navigate(`/console/runs/${encodeURIComponent(fork.id)}`);
    } catch (err) {
      replace(note, err instanceof ApiError ? err.detail : String(err));
      send.disabled = false;
    }
  } }, "Fork");
  const form = h("div", { class: "fork-form", hidden: true }, message,
    h("div", {}, send, " ", h("button", { class: "link", onclick: () => { form.hidden = true; } }, "cancel"), " ", note),
    h("div", { class: "muted small" }, "Files the run's tools wrote and commands they ran are not undone."));
  const open = h("button", { class: "link fork-open", onclick: () => {
    form.hidden = !form.hidden;
    if (!form.hidden) message.focus();
  } }, "fork from here");
  return h("span", { class: "fork-control", dataset: { step: String(step) } }, open, form);
}
