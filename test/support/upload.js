// An upload as a signed-in client makes it: the image as the form field `image_file`, the Bearer token of an
// UPLOAD_TOKENS entry. The origin's tests, the smoke and the compose test all upload this way.

/**
 * Uploads `body` with the Bearer token and returns the answer. @param {string} base the origin or the edge
 * @param {Buffer} body @param {string} [filename] @param {string} [token] @param {AbortSignal} [signal]
 */
export async function tokenUpload(base, body, filename = 'photo.jpg', token = 'test-token', signal) {
  const form = new FormData();
  form.append('image_file', new Blob([new Uint8Array(body)]), filename);
  return fetch(`${base}/upload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    body: form,
    signal,
  });
}
