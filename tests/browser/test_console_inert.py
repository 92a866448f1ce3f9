"""The console's Markdown renderer and DOM helper, fed hostile text inside Chromium: nothing
becomes markup, an event handler or a script-running link."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page

from keel.worker.scripted.llm import Script, Turn
from tests.browser.test_console_runs import sign_in_with_link

HOSTILE = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "<svg onload=window.__pwned=3></svg>",
    '<a href="javascript:window.__pwned=4">raw link</a>',
    "[x](javascript:window.__pwned=5)",
    "[x](JaVaScRiPt:window.__pwned=6)",
    "[x]( javascript:window.__pwned=7)",
    "[x](&#106;avascript:window.__pwned=8)",
    "[x](vbscript:msgbox)",
    "[x](data:text/html;base64,PHNjcmlwdD4=)",
    "[x](//evil.example/steal)",
    "![img](https://evil.example/pixel.png)",
    "<iframe src=https://evil.example></iframe>",
    "`<b>code</b>` and **<i>bold</i>**",
    "| a | b |\n|---|---|\n| <script>x</script> | [y](javascript:z) |",
    "```html\n<script>window.__pwned=9</script>\n```",
    "> <img src=x onerror=window.__pwned=10>",
    "- <details open ontoggle=window.__pwned=11>",
]

CHECK = """async (inputs) => {
  const { renderMarkdown } = await import('/console/assets/markdown.js');
  const { h } = await import('/console/assets/dom.js');
  const box = document.createElement('div');
  document.body.append(box);
  for (const text of inputs) {
    box.append(renderMarkdown(text));
    box.append(h('pre', {}, text));
    box.append(h('a', { href: text }, text));
  }
  await new Promise((r) => setTimeout(r, 300));
  const handlers = [...box.querySelectorAll('*')].flatMap(
    (el) => [...el.attributes].filter((a) => a.name.startsWith('on')).map((a) => a.name));
  const links = [...box.querySelectorAll('[href], [src]')].map(
    (el) => el.getAttribute('href') ?? el.getAttribute('src'));
  const tags = [...new Set([...box.querySelectorAll('*')].map((el) => el.tagName.toLowerCase()))];
  return { handlers, links, tags, pwned: window.__pwned ?? null, text: box.textContent };
}"""

SAFE_TAGS = {
    "div", "p", "pre", "code", "a", "span", "strong", "em", "table", "thead", "tbody", "tr",
    "th", "td", "ul", "ol", "li", "blockquote", "h2", "h3", "h4", "h5", "h6", "hr",
}  # fmt: skip


async def test_hostile_markdown_and_text_render_inert(console_stack: Any, page: Page) -> None:
    async with console_stack(Script(turns=[Turn(content="unused")])) as c:
        await sign_in_with_link(page, c.link)
        result = await page.evaluate(CHECK, HOSTILE)
    assert result["pwned"] is None
    assert result["handlers"] == []
    assert set(result["tags"]) <= SAFE_TAGS, result["tags"]
    for link in result["links"]:
        assert link == "#unsafe-link" or link.startswith("https://"), link
    assert "<script>window.__pwned = 1</script>" in result["text"]  # shown, as text
    assert page.script_errors == []  # type: ignore[attr-defined]
