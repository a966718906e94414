// Sending a file of the stack's own (the store's, the result cache's): Express's sendFile, or `send` (the
// module it uses) on the plain request.

/**
 * How a file of the store or the result cache is sent: the answer's own headers, and `dotfiles: 'allow'`:
 * the path is the stack's (`.run/data/…` under `up`), never a client's, and Express 5's send answers a 404 for
 * any path through a directory whose name starts with a dot (the default `up` served no upload: caught by the
 * fresh-machine stage).
 */
export const SEND_OPTIONS = /** @type {const} */ ({
  etag: false,
  lastModified: false,
  cacheControl: false,
  dotfiles: 'allow',
});
