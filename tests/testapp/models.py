"""Outputs of the toy pipeline, so tests can see what a worker wrote and when."""

from django.db import models


class Output(models.Model):
    """A stage output, written through the fenced-write helper; one row per (job, key)."""

    job_id = models.UUIDField()
    key = models.CharField(max_length=64)
    worker_token = models.CharField(max_length=64)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job_id", "key"], name="output_once")]


class Call(models.Model):
    """Every time a handler processed a unit (written unfenced): counts real work done."""

    job_id = models.UUIDField()
    stage = models.CharField(max_length=32)
    unit = models.IntegerField()
    pid = models.IntegerField()
    note = models.CharField(max_length=300, blank=True, default="")


class Published(models.Model):
    job_id = models.UUIDField()


class Cleaned(models.Model):
    job_id = models.UUIDField()
    from_stage = models.CharField(max_length=32)
