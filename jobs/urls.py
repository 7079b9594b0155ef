"""Included at ``/metrics`` by ``config/urls.py``."""

from django.urls import path

from jobs import views

app_name = "jobs"
urlpatterns = [path("", views.metrics, name="metrics")]
