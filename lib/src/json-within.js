// An outside service's JSON answer read within a byte bound: a node that streams without end (broken, or not
// what it claims to be) fails the call instead of filling the process's memory before its timeout.

/**
 * @param {AsyncIterable<Uint8Array> & { destroy?: (err?: Error) => void }} body an undici answer's body
 * @param {number} maxBytes @param {string} what who answered, for the error
 * @returns {Promise<any>}
 */
export async function jsonWithin(body, maxBytes, what) {
  return JSON.parse(await textWithin(body, maxBytes, what));
}

/**
 * The answer as text, within `maxBytes` (past it the body is let go and the call fails).
 * @param {AsyncIterable<Uint8Array> & { destroy?: (err?: Error) => void }} body @param {number} maxBytes
 * @param {string} what @returns {Promise<string>}
 */
export async function textWithin(body, maxBytes, what) {
  /** @type {Uint8Array[]} */
  const chunks = [];
  let bytes = 0;
  for await (const chunk of body) {
    bytes += chunk.length;
    if (bytes > maxBytes) {
      body.destroy?.();
      throw new Error(`${what} answered more than ${maxBytes} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
