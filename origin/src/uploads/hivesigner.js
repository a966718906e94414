import { request } from 'undici';
import { HttpError, jsonWithin } from '@stack/lib';

/** @param {string} reason @returns {never} */
function invalidToken(reason) {
  throw new HttpError(403, 'invalid_token', { reason });
}

/**
 * The parts of a Hivesigner access token that matter here (base64url JSON: who, for which app), read
 * the way images.hive.blog reads them before it asks Hivesigner (src/upload.ts uploadHsHandler).
 * @param {string} token @returns {{ author: string, app: string }}
 */
export function readAccessToken(token) {
  let parsed;
  try {
    parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    throw new HttpError(400, 'invalid_token', { reason: 'not a Hivesigner access token' });
  }
  const message = parsed?.signed_message;
  if (!Array.isArray(parsed?.authors) || typeof parsed.authors[0] !== 'string') invalidToken('no author');
  if (!Array.isArray(parsed?.signatures) || typeof parsed.signatures[0] !== 'string') invalidToken('no signature');
  if (
    !message ||
    typeof message !== 'object' ||
    !['login', 'posting', 'offline', 'code', 'refresh'].includes(message.type)
  )
    invalidToken('bad signed_message');
  if (typeof message.app !== 'string') invalidToken('no app');
  return { author: parsed.authors[0], app: message.app };
}

/**
 * Checks a Hivesigner upload: the token names this site's app, Hivesigner vouches for it (`/api/me`: the
 * account and the scope the user granted), the scope allows posting, and the account gave the app its
 * posting or active authority on the chain. Returns the account name.
 * @param {{ apiUrl: string, app: string, timeoutMs: number }} options
 */
export function createHivesignerAuth({ apiUrl, app, timeoutMs }) {
  const me = new URL('/api/me', apiUrl).toString();
  /** @param {string} token @returns {Promise<string>} */
  return async function verifyHivesigner(token) {
    const { author, app: tokenApp } = readAccessToken(token);
    if (tokenApp !== app) invalidToken('issued to another app');
    let answer;
    try {
      const response = await request(me, {
        method: 'POST',
        headers: { authorization: token, 'content-type': 'application/json' },
        body: '{}',
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        // the whole call: undici's timeouts run between chunks, and an answer that trickles in never ends
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (response.statusCode !== 200) await response.body.dump();
      if (response.statusCode === 401 || response.statusCode === 403) invalidToken('Hivesigner refused it');
      if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}`);
      // one account's profile and the token's scope
      answer = await jsonWithin(response.body, 2 ** 20, 'Hivesigner');
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw new HttpError(503, 'upstream_unavailable', { reason: 'hivesigner' }, { 'Retry-After': '10' });
    }
    const account = answer?.account;
    if (!account || account.name !== author) invalidToken('Hivesigner names another account');
    if (!Array.isArray(answer.scope) || !answer.scope.includes('comment')) invalidToken('the token may not post');
    const granted = ['posting', 'active'].some((role) =>
      (account[role]?.account_auths || []).some(
        (/** @type {unknown} */ auth) => Array.isArray(auth) && auth[0] === app,
      ),
    );
    if (!granted) invalidToken(`${author} has not authorised ${app}`);
    return author;
  };
}
