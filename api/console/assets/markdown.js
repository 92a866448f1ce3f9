// A small Markdown renderer that builds DOM nodes, never HTML strings.
//
// Raw HTML in the source stays literal text (there is no HTML path at all), and links
// keep only http(s), mailto and same-origin targets: `javascript:` and `data:` links
// become inert. Images are shown as links, so a report cannot make the browser fetch.
// Supported: headings, paragraphs, fenced and indented code, lists, block quotes,
// rules, tables, emphasis, inline code and links: what agents write in reports.

import { h, safeUrl } from "./dom.js";

export function renderMarkdown(source) {
  const root = h("div", { class: "markdown" });
  const lines = String(source ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)/);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      const table = fence[2] === "findings" ? findingsTable(body.join("\n")) : null;
      root.append(table ?? h("pre", {}, h("code", fence[2] ? { "data-lang": fence[2] } : {}, body.join("\n"))));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*?)\s*#*\s*$/);
    if (heading) {
      root.append(h(`h${Math.min(heading[1].length + 1, 6)}`, {}, inline(heading[2])));
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { root.append(h("hr")); i++; continue; }
    if (/^\s*>/.test(line)) {
      const body = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*>\s?/, ""));
      root.append(h("blockquote", {}, renderMarkdown(body.join("\n"))));
      continue;
    }
    if (/^\s*\|.*\|\s*$/.test(line) && i + 1 < lines.length && /^\s*\|?[\s:|-]+\|?\s*$/.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      const cells = (row) => row.trim().replace(/^\||\|$/g, "").split("|").map((c) => c.trim());
      const head = cells(line);
      i += 2;
      const rows = [];
      while (i < lines.length && /^\s*\|.*\|\s*$/.test(lines[i])) rows.push(cells(lines[i++]));
      root.append(h("table", {},
        h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, inline(c))))),
        h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, inline(c))))))));
      continue;
    }
    const item = /^(\s*)([-*+]|\d+[.)])\s+(.*)$/;
    if (item.test(line)) {
      const ordered = /\d/.test(line.match(item)[2]);
      const list = h(ordered ? "ol" : "ul");
      while (i < lines.length && item.test(lines[i])) {
        const m = lines[i].match(item);
        const text = [m[3]];
        i++;
        while (i < lines.length && lines[i].trim() && !item.test(lines[i]) && /^\s{2,}/.test(lines[i])) {
          text.push(lines[i++].trim());
        }
        list.append(h("li", {}, inline(text.join(" "))));
      }
      root.append(list);
      continue;
    }
    if (/^( {4}|\t)/.test(line)) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || !lines[i].trim())) body.push(lines[i++].replace(/^( {4}|\t)/, ""));
      root.append(h("pre", {}, h("code", {}, body.join("\n").replace(/\n+$/, ""))));
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !/^(#{1,6}\s|\s*```|\s*~~~|\s*>|\s*([-*+]|\d+[.)])\s)/.test(lines[i])) {
      para.push(lines[i++].trim());
    }
    if (!para.length) para.push(lines[i++].trim());
    root.append(h("p", {}, inline(para.join(" "))));
  }
  return root;
}

// A path with an underscore (`src/__init__.py`, `CODE_OF_CONDUCT.md`) or a `__dunder__`
// name standing alone is code, never emphasis; as in CommonMark, `_` inside a word is a
// letter, not emphasis (`snake_case_name`).
const PATH = String.raw`(?<![\w./\\\[<-])(?=[\w./-]*_)((?:[\w.-]+\/)+[\w.-]*\w|[\w.-]*\w\.[A-Za-z]\w*|__\w+__)(?![\w\]>])`;
const INLINE = new RegExp(String.raw`(\`+)([\s\S]*?[^\`])\1(?!\`)|!?\[([^\]]*)\]\(\s*([^)\s]*)(?:\s+"[^"]*")?\s*\)|` + PATH +
  String.raw`|\*\*([^*]+)\*\*|(?<!\w)__([^_]+)__(?!\w)|\*([^*\s][^*]*)\*|(?<!\w)_([^_\s][^_]*)_(?!\w)|<(https?:\/\/[^>\s]+)>`);

/** Inline Markdown as a list of nodes; anything unrecognised stays text. */
export function inline(text) {
  const out = [];
  let rest = String(text);
  while (rest) {
    const m = rest.match(INLINE);
    if (!m) { out.push(rest); break; }
    if (m.index) out.push(rest.slice(0, m.index));
    const [all, ticks, code, label, url, path, strong1, strong2, em1, em2, auto] = m;
    if (ticks) out.push(h("code", {}, code));
    else if (path) out.push(h("code", {}, path));
    else if (url !== undefined) out.push(link(label, url, all.startsWith("!")));
    else if (strong1 || strong2) out.push(h("strong", {}, inline(strong1 || strong2)));
    else if (em1 || em2) out.push(h("em", {}, inline(em1 || em2)));
    else if (auto) out.push(link(auto, auto, false));
    rest = rest.slice(m.index + all.length);
  }
  return out;
}

function link(label, url, isImage) {
  const href = safeUrl(url);
  const text = isImage ? `image: ${label || url}` : label || url;
  if (href === "#unsafe-link") {
    return h("span", { class: "unsafe-link", title: "link removed: not http(s)" }, text);
  }
  return h("a", { href, rel: "noopener noreferrer nofollow", target: "_blank" }, text);
}

const SEVERITY_ORDER = { high: 0, medium: 1, low: 2 };

/** A `findings` block (docs/findings.md) as a table; null when its text is not findings. */
function findingsTable(body) {
  let data;
  try { data = JSON.parse(body); } catch { return null; }
  if (data && !Array.isArray(data) && Array.isArray(data.findings)) data = data.findings;
  if (!Array.isArray(data) || !data.every((f) => f && typeof f === "object" && !Array.isArray(f))) return null;
  if (!data.length) return h("p", { class: "findings-none" }, "Findings: none.");
  const rows = [...data].sort((a, b) => (SEVERITY_ORDER[a.severity] ?? 3) - (SEVERITY_ORDER[b.severity] ?? 3));
  return h("table", { class: "findings" },
    h("thead", {}, h("tr", {}, ["Severity", "Place", "Finding"].map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((f) => h("tr", { class: f.verified === false ? "unverified" : "" },
      h("td", {}, String(f.severity ?? "")),
      h("td", {}, h("code", {}, String(f.file ?? "") + (f.line != null ? `:${f.line}` : ""))),
      h("td", {},
        h("strong", {}, String(f.title ?? "")),
        f.detail ? h("div", {}, String(f.detail)) : null,
        f.verified === false ? h("div", { class: "unverified-note" }, "unverified: no run of the tree read this place") : null)))));
}
