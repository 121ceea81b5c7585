"""rmqlab.widgets"""
