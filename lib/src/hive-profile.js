/** @typedef {{ avatar: string | null, cover: string | null }} Mapping */

/** An image URL is usable only when it is http(s). @param {unknown} value @returns {string | null} */
export function imageUrl(value) {
  if (typeof value !== 'string' || value.length > 2048) return null;
  try {
    const url = new URL(value.trim());
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.toString() : null;
  } catch {
    return null;
  }
}

/** @param {string} text */
function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * The profile of a Hive account: posting_json_metadata when it parses and has profile.version (what
 * current Hive frontends write), else json_metadata.
 * @param {{ json_metadata?: string, posting_json_metadata?: string }} account
 * @returns {Mapping}
 */
export function hiveMapping(account) {
  const posting = parseJson(account.posting_json_metadata || '');
  const profile = posting?.profile?.version ? posting.profile : parseJson(account.json_metadata || '')?.profile;
  return { avatar: imageUrl(profile?.profile_image), cover: imageUrl(profile?.cover_image) };
}

/** A value at a dot path. @param {any} object @param {string} path */
export function atPath(object, path) {
  return path.split('.').reduce((value, key) => (value == null ? undefined : value[key]), object);
}
