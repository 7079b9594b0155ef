"""Date formats of the admin (the pages format times in the browser, in the reader's zone): one
format with the zone named, the same as the pages' server-written (no-JavaScript) times."""

DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i T"
DATE_FORMAT = "Y-m-d"
