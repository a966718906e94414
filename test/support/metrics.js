/**
 * Reads one metric's value from a Prometheus text endpoint (sum over series whose labels include `labels`).
 * @param {string} url @param {string} name @param {Record<string, string>} [labels]
 */
export async function metricValue(url, name, labels = {}) {
  const text = await (await fetch(url)).text();
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!match || match[1] !== name) continue;
    const labelText = match[2] || '';
    if (Object.entries(labels).every(([key, value]) => labelText.includes(`${key}="${value}"`)))
      total += Number(match[3]);
  }
  return total;
}
