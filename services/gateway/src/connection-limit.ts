import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';

/** How often the "connections refused" warning may repeat while a flood goes on. */
const WARN_EVERY_MS = 60_000;

/**
 * Caps the connections one TCP peer holds open (`server.max_connections_per_address`). Slow
 * bodies are cut by `server.request_timeout_ms`, but idle keep-alive sockets and streams cost a
 * file descriptor each: without a cap one client could take them all. A connection over the
 * cap is closed before a byte is read, so it costs nothing to refuse.
 */
export function capConnectionsPerAddress(server: Server, max: number, logger: Logger): void {
  if (max <= 0) return;
  const open = new Map<string, number>();
  let lastWarning = 0;
  let refused = 0;
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? 'unknown';
    const count = open.get(address) ?? 0;
    if (count >= max) {
      refused++;
      if (Date.now() - lastWarning >= WARN_EVERY_MS) {
        lastWarning = Date.now();
        logger.warn({ address, max, refused }, 'connections refused: the address holds server.max_connections_per_address open');
        refused = 0;
      }
      socket.destroy();
      return;
    }
    open.set(address, count + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
  });
}
