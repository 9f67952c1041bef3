"""Read side: ranked recall, the `<memory-context>` block, session context, usage feedback and
agent tools; called by the chat backend before a reply.

May import: agents, errors, files, llm, memo, memories, models, settings, text, tracing, zones.
"""
