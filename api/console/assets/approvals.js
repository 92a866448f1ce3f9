// The approvals inbox: every pending interaction of the tenant across runs, oldest first.

import { get } from "./api.js";
import { h, replace } from "./dom.js";
import { decisionCard } from "./decisions.js";
import { every } from "./nav.js";

export async function approvalsPage(main) {
  const list = h("div", { id: "inbox" });
  const info = h("p", { class: "muted", id: "inbox-info" });
  const shown = new Map();
  replace(main, h("h1", {}, "Approvals"), info, list);

  async function refresh() {
    const pending = await get("/v1/interactions");
    const ids = new Set(pending.map((ia) => `${ia.run_id}/${ia.id}`));
    // Keep cards someone is deciding on (their result stays visible); add new ones in order.
    for (const [key, card] of shown) {
      if (!ids.has(key) && card.dataset.status === "pending") { card.remove(); shown.delete(key); }
    }
    for (const ia of pending) {
      const key = `${ia.run_id}/${ia.id}`;
      if (!shown.has(key)) {
        const card = decisionCard(ia);
        shown.set(key, card);
        list.append(card);
      }
    }
    replace(info, pending.length ? `${pending.length} waiting, oldest first · live` : "Nothing is waiting for you · live");
  }
  every(2000, refresh);
}
