"""The REST API (Django REST framework) and the Server-Sent Events stream."""
