import type { Runtime } from '@agentry/runtime';

/**
 * Talks to messaging platforms: inbound events to runs, outbound sends from the `channel-send` queue. The adapters arrive with channels; until then the connector connects, reports ready and stops cleanly.
 */
export async function startChannelConnector(runtime: Runtime): Promise<void> {
  runtime.lifecycle.add('channel-connector', async () => {
    runtime.logger.info('channel-connector stopped');
  });
  runtime.logger.info({ bus: runtime.bus.kind, database: runtime.db.dialect }, 'channel-connector started');
}
