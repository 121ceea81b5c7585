"""rmqlab.spark"""
