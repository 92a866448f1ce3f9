// Which agent a form starts with: one that only reads (the API says which), `review` if
// it is one, so a run nobody meant to act cannot write files by default.

export function defaultAgent(agents) {
  const readers = agents.filter((a) => a.read_only);
  return (readers.find((a) => a.name === "review") || readers[0] || agents[0] || {}).name || "";
}
