"""The job kinds the documents app registers with the engine, one bundle per module
(``ingest``: a document version's pipeline; ``reindex``: a workspace moved to another
embedder; ``evaluate``: a labelled query set run through search and scored; ``sync``: a source's items
made documents, new versions and deletes). Their names live
here, a leaf any service may import without importing a bundle."""

INGEST = "document.ingest"
REINDEX = "document.reindex"
EVALUATE = "document.evaluate"
SYNC = "document.sync"
