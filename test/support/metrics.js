/** The metrics password of the test stacks (startStack) and the test origins (the harnesses). */
export const TEST_METRICS_PASSWORD = 'metrics-test-password';

/** The Authorization header of the metrics user (metrics ports and Prometheus). @param {string} [password] */
export const metricsAuth = (password = TEST_METRICS_PASSWORD) => ({
  authorization: `Basic ${Buffer.from(`metrics:${password}`).toString('base64')}`,
});

/**
 * Reads one metric's value from a Prometheus text endpoint (sum over series whose labels include `labels`),
 * as the metrics user. @param {string} url @param {string} name @param {Record<string, string>} [labels]
 * @param {string} [password] the metrics user's, when not the test stacks' own
 */
export async function metricValue(url, name, labels = {}, password = TEST_METRICS_PASSWORD) {
  const response = await fetch(url, { headers: metricsAuth(password) });
  if (response.status !== 200) throw new Error(`${url}: ${response.status}`);
  const text = await response.text();
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
