"""Analyses and measurements over transforms, models and translations."""
