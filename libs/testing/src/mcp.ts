import type { IncomingMessage, ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/**
 * Answers one HTTP request as a stateless MCP server (streamable HTTP): a fresh server and
 * transport per request, its tools registered by `setup`. Tests mount it on whatever path their
 * own http server routes to it, next to the other answers they script.
 */
export async function answerMcp(req: IncomingMessage, res: ServerResponse, name: string, setup: (server: McpServer) => void): Promise<void> {
  const server = new McpServer({ name, version: '1.0.0' });
  setup(server);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  let body = '';
  for await (const chunk of req) body += chunk;
  await transport.handleRequest(req, res, body ? JSON.parse(body) : undefined);
}
