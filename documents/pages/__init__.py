"""The HTML pages (``documents/urls.py`` routes them): the documents list, a document's live
page, collections, chunks, deletes and process again, search. Login and a workspace required;
the same selectors and services as the API underneath, never a status written here."""
